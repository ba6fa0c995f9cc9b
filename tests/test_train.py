"""Training: run directory contents, TensorBoard tags, exact resume, checkpoints, bf16 autocast, DDP on gloo."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from guitarformer.training.checkpoint import load_checkpoint, save_checkpoint
from guitarformer.errors import GuitarformerError
from guitarformer.training.loop import train
from guitarformer.training.loop import lr_at


def _cfg(tiny_cfg, tiny_dataset, **train_kw):
    cfg = copy.deepcopy(tiny_cfg)
    cfg.data.dataset = str(tiny_dataset)
    for k, v in train_kw.items():
        setattr(cfg.train, k, v)
    return cfg


def _scalars(tb_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_run_directory_and_tensorboard(tiny_run):
    assert (tiny_run / "config.yaml").is_file() and (tiny_run / "tokenizer.json").is_file()
    assert (tiny_run / "ckpt" / "last.pt").is_file() and (tiny_run / "ckpt" / "best.pt").is_file()
    tags = _scalars(tiny_run / "tb")
    for t in ("train/loss", "train/lr", "train/grad_norm", "val/loss", "val/ppl", "val/accuracy", "perf/tokens_per_s"):
        assert t in tags, t
    losses = [v for _, v in tags["train/loss"]]
    assert losses[-1] < losses[0]  # it learns
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tiny_run / "tb"), size_guidance={"images": 0, "audio": 0, "tensors": 0})
    acc.Reload()
    assert "sample/piano_roll" in acc.Tags()["images"]
    assert "sample/audio" in acc.Tags()["audio"]


def test_checkpoint_loads_weights_only(tiny_run):
    state = torch.load(tiny_run / "ckpt" / "last.pt", weights_only=True)
    assert state["step"] == 20 and not any(k.startswith(("_orig_mod.", "module.")) for k in state["model"])


def test_hostile_checkpoint_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    p = tmp_path / "evil.pt"
    torch.save({"model": Evil(), "config": {}}, p)
    with pytest.raises(GuitarformerError, match="refusing"):
        load_checkpoint(p)
    assert not (tmp_path / "pwned").exists()


def test_save_failure_keeps_previous_checkpoint(tmp_path):
    p = tmp_path / "ck" / "last.pt"
    save_checkpoint(p, {"model": {"w": torch.ones(2)}, "config": {}})
    os.chmod(p.parent, 0o500)
    try:
        if os.access(p.parent, os.W_OK):
            pytest.skip("running as a user that ignores permissions")
        with pytest.raises(GuitarformerError, match="previous checkpoint there is intact"):
            save_checkpoint(p, {"model": {"w": torch.zeros(2)}, "config": {}})
    finally:
        os.chmod(p.parent, 0o700)
    assert torch.equal(load_checkpoint(p)["model"]["w"], torch.ones(2))


def test_lr_schedule(tiny_cfg):
    cfg = copy.deepcopy(tiny_cfg)
    cfg.train.warmup_steps, cfg.train.max_steps, cfg.train.lr, cfg.train.min_lr = 10, 100, 1.0, 0.1
    assert lr_at(0, cfg) == pytest.approx(0.1)
    assert lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(55, cfg) == pytest.approx(0.55)
    assert lr_at(100, cfg) == pytest.approx(0.1)


def _train_losses(run: Path) -> dict[int, float]:
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d["kind"] == "train":
            out[d["step"]] = d["loss"]
    return out


def test_exact_resume(tiny_cfg, tiny_dataset, tmp_path):
    cfg = _cfg(tiny_cfg, tiny_dataset, log_interval=1, max_steps=16, eval_interval=4)
    cfg.model.dropout = 0.1  # dropout RNG must be restored too
    cfg.data.transpose = 3  # and the augmentation's draws
    train(copy.deepcopy(cfg), run_dir=tmp_path / "full", progress=False)
    train(copy.deepcopy(cfg), run_dir=tmp_path / "split", progress=False, stop_at=7)
    train(copy.deepcopy(cfg), resume=tmp_path / "split", progress=False)
    full, split = _train_losses(tmp_path / "full"), _train_losses(tmp_path / "split")
    assert sorted(full) == sorted(split) == list(range(1, 17))
    for s in range(1, 17):
        assert split[s] == pytest.approx(full[s], abs=1e-6), s


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    from guitarformer.config import Config

    with pytest.raises(GuitarformerError, match="no checkpoint to resume"):
        train(Config(), resume=tmp_path)


def test_encoder_decoder_trains(tiny_cfg, tiny_dataset, tmp_path):
    cfg = _cfg(tiny_cfg, tiny_dataset, max_steps=30, eval_interval=30, lr=5e-3)
    cfg.model.kind = "encoder_decoder"
    res = train(cfg, run_dir=tmp_path / "ed", progress=False)
    losses = _train_losses(tmp_path / "ed")
    assert losses[max(losses)] < losses[1] and res["best_val_loss"] < 6.0


def test_bf16_autocast_on_cpu(tiny_cfg, tiny_dataset, tmp_path):
    cfg = _cfg(tiny_cfg, tiny_dataset, dtype="bfloat16", max_steps=10, eval_interval=10)
    res = train(cfg, run_dir=tmp_path / "bf16", progress=False)
    assert res["best_val_loss"] < 7.0 and torch.isfinite(torch.tensor(res["best_val_loss"]))


def test_nonfinite_loss_stops_with_message(tiny_cfg, tiny_dataset, tmp_path):
    cfg = _cfg(tiny_cfg, tiny_dataset, lr=1e12, warmup_steps=1, grad_clip=0.0, max_steps=20, eval_interval=2)
    with pytest.raises(GuitarformerError, match="training loss became"):
        train(cfg, run_dir=tmp_path / "nan", progress=False)


def test_ddp_two_processes_on_gloo(tiny_dataset, tmp_path):
    """Real DDP through torchrun on CPU: both ranks step in lock-step and rank 0 writes one run."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517",
           "-m", "guitarformer", "train", "--config", "tiny", "--data", str(tiny_dataset),
           "--run-dir", str(tmp_path / "ddp"), "--max-steps", "6", "--device", "cpu",
           "--set", "train.eval_interval=3"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    state = load_checkpoint(tmp_path / "ddp" / "ckpt" / "last.pt")
    assert state["step"] == 6 and len(state["rng"]["data"]) == 2
    assert "cpu x2" in r.stdout
