"""Shared fixtures: an isolated cache, the tiny built-in corpus prepared once per session, a tiny trained run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

SHARED_GUITAR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "guitar"


def pytest_configure(config):
    torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models on 2 shared cores run fastest on one thread: a second one only spins under OpenMP waits
    (measured ~50x slower under load). Modules of tiny-model tests use it with `pytestmark`."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gf-cache")
    os.environ["GUITARFORMER_CACHE"] = str(root)  # never touch the user's cache from tests
    return root


@pytest.fixture(scope="session")
def tiny_cfg(cache_root):
    from guitarformer.config import load_config

    return load_config("tiny")


@pytest.fixture(scope="session")
def tiny_dataset(cache_root, tiny_cfg) -> Path:
    """The first 8 tunes of the built-in corpus, prepared (the same path `guitarformer train` takes)."""
    from guitarformer.data.corpus import ensure_builtin_dataset

    return ensure_builtin_dataset(tiny_cfg.data, progress=False)


@pytest.fixture(scope="session")
def tiny_run(tiny_dataset, tiny_cfg, tmp_path_factory) -> Path:
    import copy

    from guitarformer.training.loop import train

    cfg = copy.deepcopy(tiny_cfg)
    cfg.data.dataset = str(tiny_dataset)
    run = tmp_path_factory.mktemp("runs") / "tiny"
    train(cfg, run_dir=run, progress=False)
    return run


@pytest.fixture
def shared_guitar() -> Path:
    if not SHARED_GUITAR.is_dir():
        pytest.skip("../shared/data/guitar is absent")
    return SHARED_GUITAR
