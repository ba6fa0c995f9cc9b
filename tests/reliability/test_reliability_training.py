"""Reliability of training: SIGKILL, SIGTERM and Ctrl-C mid-run, a full disk, a failing rename: the last
checkpoint survives and resumes (docs/results/RELIABILITY.md).
"""

from __future__ import annotations

import errno
import io
import json
import os
import random
import signal
import sys
import time

import pytest
import torch

from guitarformer.runs.checkpoint import load_checkpoint, save_checkpoint
from guitarformer.errors import GuitarformerError
from helpers.reliability import Proc, _env, assert_clear_error, cli, fake_run_with, gf, python_proc, train_args

# ---------------------------------------------------------------- killed and interrupted training


_SLOW_SAVE_DRIVER = """
    import io, sys, time, torch

    real, calls, target = torch.save, 0, int(sys.argv[1])

    def save(obj, f, *a, **k):
        global calls
        calls += 1
        if calls == target:  # a torn temp file on disk, then hang inside save_checkpoint until killed
            buf = io.BytesIO()
            real(obj, buf, *a, **k)
            f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
            f.flush()
            print("IN_SAVE", calls, f.name, flush=True)
            time.sleep(600)
        return real(obj, f, *a, **k)

    torch.save = save
    from guitarformer.cli import main
    main(sys.argv[2:], prog_name="guitarformer")
"""


@pytest.mark.slow
def test_sigkill_during_checkpoint_write_keeps_last_and_resumes(tmp_path, cache_root, rel_dataset):
    run = tmp_path / "run"
    # saves: step 5 last.pt (1) + best.pt (2), step 10 last.pt (3) <- killed half-way through writing it
    p = python_proc(_SLOW_SAVE_DRIVER, 3, *train_args(rel_dataset, run, "--max-steps", "30",
                                                      "--set", "train.eval_interval=5"), cwd=tmp_path,
                    env=_env(cache_root))
    line = p.wait_for("IN_SAVE")
    assert "last.pt" in line
    p.kill()
    assert list((run / "ckpt").glob(".last.pt.tmp-*")), "the torn temp file is what a kill mid-write leaves"
    state = load_checkpoint(run / "ckpt" / "last.pt")
    assert state["step"] == 5
    r = gf("train", "--resume", run, cwd=tmp_path, env=_env(cache_root))
    assert r.returncode == 0, r.stderr
    assert "resumed at step 5" in r.stdout
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == 30
    assert not list((run / "ckpt").glob(".*.tmp-*")), "the next save removes a killed writer's temp file"


@pytest.mark.slow
def test_sigkill_at_a_random_moment_then_resume(tmp_path, cache_root, rel_dataset):
    run = tmp_path / "run"
    rng = random.Random(int(os.environ.get("GF_KILL_SEED", "7")))
    p = Proc([sys.executable, "-m", "guitarformer", *train_args(rel_dataset, run, "--max-steps", "100000",
                                                                  "--set", "train.eval_interval=3")],
             tmp_path, _env(cache_root))
    p.wait_for("params, vocab")
    time.sleep(rng.uniform(0.3, 2.5))
    p.kill()
    state = load_checkpoint(run / "ckpt" / "last.pt")  # whatever moment it died, last.pt is whole
    step = state["step"]
    assert step > 0 and step % 3 == 0
    r = gf("train", "--resume", run, "--max-steps", step + 4, cwd=tmp_path, env=_env(cache_root))
    assert r.returncode == 0, r.stderr
    assert f"resumed at step {step}" in r.stdout
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == step + 4


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_a_checkpoint_before_exit(tmp_path, cache_root, rel_dataset, sig):
    """SIGTERM (a scheduler) or Ctrl-C (SIGINT to the process group) mid-training: a checkpoint at the step it stopped."""
    run = tmp_path / "run"
    p = Proc([sys.executable, "-m", "guitarformer", *train_args(rel_dataset, run, "--max-steps", "100000",
                                                                  "--set", "train.eval_interval=100000")],
             tmp_path, _env(cache_root))
    p.wait_for("params, vocab")
    time.sleep(1.0)
    assert not (run / "ckpt" / "last.pt").exists()  # no periodic checkpoint yet: the one we find is the signal's
    p.signal_group(sig)
    rc = p.finish(timeout=60)
    out = "".join(p.out)
    assert rc == 128 + int(sig), p.err  # non-zero: a scheduler can tell an interrupted run from a finished one
    assert "Traceback" not in p.err and "--resume" in p.err
    assert f"stopped by signal {signal.Signals(sig).name}" in out
    step = load_checkpoint(run / "ckpt" / "last.pt")["step"]
    assert step > 0
    assert json.loads((run / "summary.json").read_text())["step"] == step
    r = cli("train", "--resume", run, "--max-steps", step + 3)  # resume from a kill: the SIGKILL tests, in a process
    assert r.exit_code == 0 and f"resumed at step {step}" in r.stdout, r.output
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == step + 3


# ---------------------------------------------------------------- disk full, permission denied


def _state(v: float) -> dict:
    return {"model": {"w": torch.full((64, 64), v)}, "config": {}, "step": int(v)}


def test_disk_full_during_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    import guitarformer.runs.checkpoint as ckmod

    p = tmp_path / "ckpt" / "last.pt"
    save_checkpoint(p, _state(1))
    real_open = open

    class FullDisk(io.FileIO):
        written = 0

        def write(self, b):
            FullDisk.written += len(b)
            if FullDisk.written > 4096:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(b)

    monkeypatch.setattr(ckmod, "open", lambda f, mode="r", *a, **k: FullDisk(f, "wb") if "w" in mode
                        else real_open(f, mode, *a, **k), raising=False)
    with pytest.raises(GuitarformerError, match="previous checkpoint there is intact") as e:
        save_checkpoint(p, _state(2))
    assert "--resume" in e.value.fix
    monkeypatch.undo()
    assert load_checkpoint(p)["step"] == 1
    assert [x.name for x in p.parent.iterdir()] == ["last.pt"]  # no temp file left behind


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_rename_failure_keeps_previous_checkpoint(tmp_path, monkeypatch, err):
    import guitarformer.runs.checkpoint as ckmod

    p = tmp_path / "last.pt"
    save_checkpoint(p, _state(1))

    def fail(src, dst):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(ckmod.os, "replace", fail)
    with pytest.raises(GuitarformerError, match=f"{os.strerror(err)}; the previous checkpoint there is intact"):
        save_checkpoint(p, _state(2))
    monkeypatch.undo()
    assert load_checkpoint(p)["step"] == 1 and [x.name for x in tmp_path.iterdir()] == ["last.pt"]


def test_first_save_failing_says_there_is_no_earlier_checkpoint(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(GuitarformerError, match="no earlier checkpoint exists there"):
        save_checkpoint(tmp_path / "afile" / "ckpt" / "last.pt", _state(1))


def test_disk_full_mid_training_is_one_clear_line(tmp_path, cache_root, rel_dataset, monkeypatch):
    """The CLI: the second checkpoint write fails; the message says the previous one survives; resume works."""
    import guitarformer.runs.checkpoint as ckmod

    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) >= 3:  # step 5's last.pt and best.pt succeed, step 10's last.pt finds the disk full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(ckmod.os, "replace", replace)
    run = tmp_path / "run"
    r = cli(*train_args(rel_dataset, run, "--max-steps", "20", "--set", "train.eval_interval=5"))
    assert_clear_error(r, "No space left on device; the previous checkpoint there is intact")
    monkeypatch.undo()
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == 5
    r = cli("train", "--resume", run)
    assert r.exit_code == 0, r.output
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == 20


def test_flipped_bit_inside_the_weights_is_one_clear_line(tmp_path, cache_root, rel_run):
    """PyTorch does not check its records' CRCs: a changed byte inside a weight tensor used to load silently. The
    checksum save_checkpoint writes catches it; a checkpoint without one (older runs) still loads."""
    state = load_checkpoint(rel_run / "ckpt" / "last.pt")
    name, w = max(state["model"].items(), key=lambda kv: kv[1].numel())
    marker = torch.arange(w.numel(), dtype=torch.float32).reshape(w.shape).to(w.dtype) + 0.5
    state["model"][name] = marker
    ck = fake_run_with(rel_run, tmp_path / "r", state=state)
    save_checkpoint(ck, state)  # as training writes it: with the checksum
    assert torch.equal(load_checkpoint(ck)["model"][name], marker)
    raw = bytearray(ck.read_bytes())
    pattern = marker.reshape(-1)[1000:1008].contiguous().view(torch.uint8).numpy().tobytes()
    at = bytes(raw).find(pattern)
    assert at > 0  # stored uncompressed: the weights' bytes are in the file as they are
    raw[at + 3] ^= 0x10
    ck.write_bytes(bytes(raw))
    assert_clear_error(cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid"), "damaged")
    assert_clear_error(cli("train", "--resume", tmp_path / "r"), "damaged")
    # the same state saved the old way (no checksum entry) loads
    old = tmp_path / "old.pt"
    torch.save(state, old)
    assert "checksum" not in torch.load(old, weights_only=True)
    assert torch.equal(load_checkpoint(old)["model"][name], marker)
