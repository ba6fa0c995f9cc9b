"""Shared fixtures: an isolated cache, the tiny built-in corpus prepared once per session, a tiny trained run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

SHARED_GUITAR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "guitar"
# CI sets this: there the shared data is present, so a test that needs it and skips is a failure, not a pass.
REQUIRE_SHARED = "GUITARFORMER_REQUIRE_SHARED_DATA"
_shared_tests: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}


def pytest_configure(config):
    torch.set_num_threads(min(2, torch.get_num_threads()))
    config.addinivalue_line("markers", "shared_data: needs ../shared/data/guitar (skips without it)")


def pytest_collection_modifyitems(config, items):
    for item in items:  # a test that asks for the shared_guitar fixture needs the folder
        if "shared_guitar" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.shared_data)


def _skip_reason(report) -> str:
    return str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_runtest_logreport(report):
    """Count the tests that need the shared data: marked shared_data, or skipped for want of it."""
    needs = "shared_data" in report.keywords
    if report.skipped and "shared" in _skip_reason(report).lower():
        needs = True
    if not needs:
        return
    if report.skipped:
        _shared_tests["skipped"].append(f"{report.nodeid}: {_skip_reason(report)[:160]}")
    elif report.when == "call":
        _shared_tests["passed" if report.passed else "failed"].append(report.nodeid)
    elif report.failed:  # an error in setup
        _shared_tests["failed"].append(report.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    ran, skipped = len(_shared_tests["passed"]) + len(_shared_tests["failed"]), _shared_tests["skipped"]
    if not ran and not skipped:
        return
    terminalreporter.write_line(f"tests that need ../shared/data/guitar: {ran} ran "
                                f"({len(_shared_tests['failed'])} failed), {len(skipped)} skipped")
    if skipped and SHARED_GUITAR.is_dir() and os.environ.get(REQUIRE_SHARED) == "1":
        terminalreporter.write_line(f"{REQUIRE_SHARED}=1 and {SHARED_GUITAR} is present, yet these skipped:")
        for line in skipped:
            terminalreporter.write_line(f"  {line}")


def pytest_sessionfinish(session, exitstatus):
    if (_shared_tests["skipped"] and SHARED_GUITAR.is_dir() and os.environ.get(REQUIRE_SHARED) == "1"
            and exitstatus == 0):
        session.exitstatus = 1


@pytest.fixture
def cxx():
    """torch.compile on a CPU (inductor) builds C++: skip where no compiler is on the PATH."""
    if not (os.environ.get("CXX") or any(shutil.which(c) for c in ("g++", "c++", "clang++"))):
        pytest.skip("torch.compile on a CPU needs a C++ compiler (g++ or clang)")


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models on 2 shared cores run fastest on one thread: a second one only spins under OpenMP waits
    (measured ~50x slower under load). Modules of tiny-model tests use it with `pytestmark`."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session", autouse=True)
def cache_root(tmp_path_factory) -> Path:
    """An empty cache for the whole session, for every test (autouse): a test that reads a run's built-in dataset
    must not find the one a user (or CI's machine) prepared, which would make its result depend on the machine."""
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


# ---------------------------------------------------------------- the reliability tests' riffs, dataset and run


@pytest.fixture(scope="session")
def riff_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("riffs")
    from helpers.reliability import write_riffs

    write_riffs(d, 6)
    return d


@pytest.fixture(scope="session")
def rel_dataset(cache_root, riff_dir, tmp_path_factory) -> Path:
    from guitarformer.data.prepare import PrepareOptions, prepare

    out = tmp_path_factory.mktemp("rel") / "ds"
    meta = prepare([riff_dir], out, options=PrepareOptions(workers=1, progress=False))
    assert meta["status"].get("ok") == 6
    return out


@pytest.fixture(scope="session")
def rel_run(rel_dataset, tiny_cfg, tmp_path_factory) -> Path:
    import copy

    from guitarformer.training.loop import train

    cfg = copy.deepcopy(tiny_cfg)
    cfg.data.dataset = str(rel_dataset)
    cfg.train.max_steps = 10
    cfg.train.eval_interval = 5
    run = tmp_path_factory.mktemp("relruns") / "run"
    train(cfg, run_dir=run, progress=False)
    return run
