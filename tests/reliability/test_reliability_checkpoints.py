"""Hostile and damaged checkpoints: refused or reported in one line, never executed (docs/results/RELIABILITY.md).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from guitarformer.runs.checkpoint import load_checkpoint
from helpers.reliability import _env, assert_clear_error, cli, fake_run_with, gf

# ---------------------------------------------------------------- hostile and damaged checkpoints


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo pwned > {self.marker}",))


def test_hostile_checkpoint_is_refused_by_sample_and_resume(tmp_path, cache_root, rel_run):
    marker = tmp_path / "pwned"
    ck = fake_run_with(rel_run, tmp_path / "evil", state={"model": _Evil(marker), "config": {}, "step": 1})
    r = cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid")
    assert_clear_error(r, "refusing to load")
    r = cli("train", "--resume", tmp_path / "evil")
    assert_clear_error(r, "refusing to load")
    assert not marker.exists(), "the payload ran"
    assert not (tmp_path / "x.mid").exists()


@pytest.mark.slow
def test_hostile_checkpoint_in_a_subprocess(tmp_path, cache_root, rel_run):
    """The same through a real process: one line on stderr, exit 2, and the payload never ran."""
    marker = tmp_path / "pwned"
    ck = fake_run_with(rel_run, tmp_path / "evil", state={"model": _Evil(marker), "config": {}})
    r = gf("sample", "--checkpoint", ck, "--out", "x.mid", cwd=tmp_path, env=_env(cache_root))
    assert r.returncode == 2
    assert r.stderr.startswith("error: refusing to load") and "Traceback" not in r.stderr, r.stderr
    assert len([x for x in r.stderr.splitlines() if x.strip()]) == 2  # error: + fix:
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["truncated", "bitflips", "random", "empty", "text", "list_model", "no_config"])
def test_damaged_checkpoint_is_one_clear_line(tmp_path, cache_root, rel_run, kind):
    good = (rel_run / "ckpt" / "last.pt").read_bytes()
    rng = random.Random(kind)
    if kind == "truncated":
        data = good[: len(good) // 3]
    elif kind == "bitflips":  # in the zip directory at the end, where flips are fatal
        b = bytearray(good)
        for _ in range(16):
            b[len(b) - 1 - rng.randrange(200)] ^= 0xFF
        data = bytes(b)
    elif kind == "random":
        data = rng.randbytes(4096)
    elif kind == "empty":
        data = b""
    elif kind == "text":
        data = b"these are not the weights you are looking for\n"
    if kind == "list_model":
        ck = fake_run_with(rel_run, tmp_path / "r", state={"model": [1, 2, 3], "config": {}})
    elif kind == "no_config":
        ck = fake_run_with(rel_run, tmp_path / "r", state={"model": {"w": torch.ones(1)}})
    else:
        ck = fake_run_with(rel_run, tmp_path / "r", ckpt_bytes=data)
    needle = "not a guitarformer checkpoint" if kind in ("list_model", "no_config") else "unreadable or damaged"
    assert_clear_error(cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid"), needle)
    assert_clear_error(cli("train", "--resume", tmp_path / "r"), needle)


def test_resume_from_a_checkpoint_that_does_not_match_its_config(tmp_path, cache_root, rel_run):
    state = load_checkpoint(rel_run / "ckpt" / "last.pt")
    state["config"]["model"]["n_embd"] = 48  # weights are 32 wide
    ck = fake_run_with(rel_run, tmp_path / "r", state=state)
    assert_clear_error(cli("train", "--resume", tmp_path / "r"), "does not match")
    assert_clear_error(cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid"), "does not match")


def test_sample_out_under_a_file_is_a_clear_line(tmp_path, cache_root, rel_run):
    (tmp_path / "afile").write_text("x")
    assert_clear_error(cli("sample", "--run", rel_run, "--out", tmp_path / "afile" / "x.mid", "--bars", "1"),
                       "cannot create the folder")


