"""Training: run directory contents, TensorBoard tags, exact resume, checkpoints, bf16 autocast, DDP on gloo."""

import copy
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from guitarformer import IGNORE_INDEX
from guitarformer.config import load_config, set_values
from guitarformer.errors import GuitarformerError
from guitarformer.models import build_model
from guitarformer.runs.checkpoint import load_checkpoint, save_checkpoint
from guitarformer.runtime import Dist
from guitarformer.training.budget import Budget, Costs, fit_steps_to_budget, work_after
from guitarformer.training.data import Data
from guitarformer.training.loop import evaluate, lr_at, schedule_line, train, warmup_steps


def _cfg(tiny_cfg, tiny_dataset, **train_kw):
    cfg = copy.deepcopy(tiny_cfg)
    cfg.data.dataset = str(tiny_dataset)
    for k, v in train_kw.items():
        setattr(cfg.train, k, v)
    return cfg


def _untrained_val_loss(cfg, dataset) -> float:
    """The val loss of the model a run starts from (same seed, same val windows): what training must beat."""
    cfg = copy.deepcopy(cfg)
    torch.manual_seed(cfg.train.seed)
    data = Data(cfg, Path(dataset))
    cfg.model.vocab_size = len(data.tokenizer)
    loss = evaluate(build_model(cfg.model), data, cfg.model.kind, torch.device("cpu"), torch.float32,
                    cfg.train.batch_size, cfg.train.eval_iters)["loss"]
    assert abs(loss - math.log(len(data.tokenizer))) < 0.2  # an untrained model is about uniform over the vocabulary
    return loss


def _scalars(tb_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_run_directory_and_tensorboard(tiny_run):
    assert (tiny_run / "config.yaml").is_file() and (tiny_run / "tokenizer.json").is_file()
    assert (tiny_run / "ckpt" / "last.pt").is_file() and (tiny_run / "ckpt" / "best.pt").is_file()
    tags = _scalars(tiny_run / "tb")
    for t in ("train/loss", "train/lr", "train/grad_norm", "val/loss", "val/ppl", "val/accuracy", "val/nats_per_note",
              "perf/tokens_per_s"):
        assert t in tags, t
    losses = [v for _, v in tags["train/loss"]]
    assert losses[-1] < losses[0]  # it learns
    assert "hparam/best_val_loss" in tags  # the hparams results live in the run's own event file ...
    assert not [p for p in (tiny_run / "tb").iterdir() if p.is_dir()]  # ... not in a run of their own beside it
    cfg = load_config(str(tiny_run / "config.yaml"))
    summary = json.loads((tiny_run / "summary.json").read_text())
    assert summary["val_nats_per_note"] == pytest.approx(tags["val/nats_per_note"][-1][1], rel=1e-5)
    assert summary["best_val_loss"] < _untrained_val_loss(cfg, cfg.data.dataset) - 1.0  # 5.87 -> 4.54 nats/token
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tiny_run / "tb"), size_guidance={"images": 0, "audio": 0, "tensors": 0})
    acc.Reload()
    assert "sample/piano_roll" in acc.Tags()["images"]  # the riff drawn at the end (audio: see test_riff_in_tensorboard)
    assert "sample/tab/text_summary" in acc.Tags()["tensors"] and "sample/error/text_summary" not in acc.Tags()["tensors"]


def test_riff_in_tensorboard(tmp_path, tiny_cfg, monkeypatch):
    """log_riff writes a riff with notes as piano roll, audio and tab (the sampler replaced by a real file's part),
    the audio from the bundled soundfont with no synthesizer program on PATH."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    import guitarformer.training.progress as progress
    from guitarformer.compose.riffs import Riff
    from guitarformer.readers import read_guitar

    monkeypatch.setenv("PATH", str(tmp_path))  # no fluidsynth
    gs = read_guitar(Path(__file__).parents[1] / "fixtures" / "io" / "drop_d_capo.gp5")[0]
    monkeypatch.setattr(progress, "generate_riff", lambda *a, **k: Riff(ids=[], gs=gs, frets=gs.frets))
    writer = SummaryWriter(str(tmp_path / "tb"))
    model = torch.nn.Linear(2, 2)
    progress.log_riff(writer, model, None, tiny_cfg, 7, "cpu")
    writer.close()
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"images": 0, "audio": 0, "tensors": 0})
    acc.Reload()
    assert "sample/piano_roll" in acc.Tags()["images"] and "sample/audio" in acc.Tags()["audio"]
    assert acc.Audio("sample/audio")[0].step == 7 and model.training
    assert acc.Audio("sample/audio")[0].length_frames > acc.Audio("sample/audio")[0].sample_rate  # over 1 s
    tab = acc.Tensors("sample/tab/text_summary")[0].tensor_proto.string_val[0].decode()
    assert tab.count("|") > 12


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


def test_a_short_run_warms_up_within_its_steps_and_says_so(tiny_cfg):
    """train.warmup_steps 100 and a 40-step fine-tune: the warm-up is cut to a tenth of the run, so the run reaches
    its learning rate and decays to min_lr; the log line gives the schedule that runs."""
    cfg = copy.deepcopy(tiny_cfg)
    cfg.train.warmup_steps, cfg.train.max_steps, cfg.train.lr, cfg.train.min_lr = 100, 40, 1.0, 0.1
    assert warmup_steps(cfg.train) == 4
    lrs = [lr_at(s, cfg) for s in range(40)]
    assert lrs[3] == pytest.approx(1.0) and max(lrs) == pytest.approx(1.0)
    assert all(a > b for a, b in zip(lrs[4:], lrs[5:])) and lrs[-1] < 0.12
    line = schedule_line(cfg.train)
    assert "warm-up 4 step(s) (train.warmup_steps 100, at most a tenth of the run)" in line and "at step 40" in line
    cfg.train.max_steps = 2000  # a long run keeps the configured warm-up, and says nothing of a cap
    assert warmup_steps(cfg.train) == 100 and "at most" not in schedule_line(cfg.train)
    cfg.train.warmup_steps, cfg.train.max_steps = 0, 5
    assert warmup_steps(cfg.train) == 0 and lr_at(0, cfg) == pytest.approx(1.0)


def test_time_budget_arithmetic(tiny_cfg):
    """15 minutes, 60 s spent by step 13, 1 s a step, an evaluation every 100 steps costing 10 s, a 20 s sample at
    every 200th step and one at the end, 5 s to end: the most steps whose work fits; capped by max_steps; never
    fewer than one more step."""
    cfg = copy.deepcopy(tiny_cfg)
    cfg.train.time_budget_min, cfg.train.max_steps, cfg.train.eval_interval, cfg.train.sample_interval = 15, 5000, 100, 200
    costs = Costs(eval_s=10.0, riff_s=20.0, end_s=5.0)
    n = fit_steps_to_budget(cfg, 13, 60.0, 1.0, costs)
    # 727 steps to step 740: evals at 100..700 and 740 (8), samples at 200, 400, 600 and the end (4)
    assert work_after(cfg, 13, 727, 1.0, costs) == 727 + 8 * 10 + 4 * 20 + 5
    assert work_after(cfg, 13, n - 13, 1.0, costs) <= 840 < work_after(cfg, 13, n - 12, 1.0, costs)
    cfg.train.max_steps = 500
    assert fit_steps_to_budget(cfg, 13, 60.0, 1.0, costs) == 500
    assert fit_steps_to_budget(cfg, 13, 2000.0, 1.0, costs) == 14


def _simulate(cfg, startup_s: float, step_s, eval_s: float, riff_s: float) -> tuple[float, int, bool]:
    """The loop's calls into Budget on a fake clock: (seconds the whole run took, steps, stopped by out_of_time).
    `step_s(step)`: the seconds of that step (a burst of load makes some slower)."""
    now = [startup_s]
    # rank 1 of one: no config.yaml to write
    b = Budget(cfg, Dist(rank=1), torch.device("cpu"), Path("/nonexistent"), 0.0, eval_batches=10,
               clock=lambda: now[0])
    bar, t, step, stopped = type("Bar", (), {"total": 0})(), cfg.train, 0, False

    def probe() -> float:
        now[0] += eval_s / 10
        return eval_s / 10

    while step < t.max_steps:
        step += 1
        now[0] += step_s(step)
        b.step(step, step_s(step), bar, probe)
        stopped = b.out_of_time(step)
        if step % t.eval_interval == 0 or step == t.max_steps or stopped:
            now[0] += eval_s
            b.after_eval(step, eval_s - 1.0, 1.0, bar)  # validation, then the checkpoint saves
            if t.sample_interval and step % t.sample_interval == 0:
                now[0] += riff_s
                b.after_riff(riff_s)
        if stopped:
            break
    return now[0] + riff_s + 1.0, step, stopped  # the final sample and the summary


def test_time_budget_counts_everything(tiny_cfg):
    """A 15-minute budget on a fake clock: 75 s of start-up and compilation, 1.1 s steps, 9 s evaluations, 12 s
    samples: the run ends within the budget and uses most of it, with the schedule's end reached (no stop)."""
    cfg = copy.deepcopy(tiny_cfg)
    t = cfg.train
    t.time_budget_min, t.max_steps, t.eval_interval, t.sample_interval = 15, 5000, 250, 500
    total, steps, stopped = _simulate(cfg, 75.0, lambda s: 1.1, 9.0, 12.0)
    assert 0.97 * 900 <= total <= 900 and not stopped and steps == t.max_steps
    assert steps < 5000  # fitted down


def test_time_budget_under_a_burst_of_load(tiny_cfg):
    """Steps twice as slow from step 300 to 500 (another job on a shared machine): the fits after each evaluation
    follow, and the run still ends within the budget."""
    cfg = copy.deepcopy(tiny_cfg)
    t = cfg.train
    t.time_budget_min, t.max_steps, t.eval_interval, t.sample_interval = 15, 5000, 100, 0
    total, steps, _ = _simulate(cfg, 60.0, lambda s: 2.2 if 300 <= s < 500 else 1.1, 9.0, 12.0)
    assert 0.9 * 900 <= total <= 900
    # no evaluation between the first fit and the end to see the burst: the clock stops the run in time
    t.max_steps, t.eval_interval = 5000, 2000
    total, steps, stopped = _simulate(cfg, 60.0, lambda s: 3.0 if s > 500 else 1.1, 9.0, 12.0)
    assert 850 <= total <= 900 and stopped and steps < t.max_steps


def test_time_budget_fixes_the_steps_and_resume_keeps_them(tiny_cfg, tiny_dataset, tmp_path):
    """A budget too small for max_steps ends the run early: the fit gives one more step than the timed ones (the
    schedule decays to it), and the clock, already past the budget, stops the run where it is; the decided steps
    are in config.yaml and a resumed run trains to them, loss for loss."""
    cfg = _cfg(tiny_cfg, tiny_dataset, log_interval=1, max_steps=40, eval_interval=8, time_budget_min=1e-4)
    full, split = _full_and_resumed(cfg, tmp_path, stop_at=23)  # stopped right after the budget is fixed
    assert json.loads((tmp_path / "full" / "summary.json").read_text())["stopped_by"].startswith("time budget")
    assert sorted(full) == list(range(1, 24)) and sorted(split) == list(range(1, 25))
    assert load_config(str(tmp_path / "full" / "config.yaml")).train.max_steps == 24
    for s in full:
        assert split[s] == pytest.approx(full[s], abs=1e-6), s


def _train_losses(run: Path) -> dict[int, float]:
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d["kind"] == "train":
            out[d["step"]] = d["loss"]
    return out


def _full_and_resumed(cfg, tmp_path, stop_at: int) -> tuple[dict, dict]:
    """Train losses by step of one run straight through, and of one stopped at `stop_at` and resumed."""
    train(copy.deepcopy(cfg), run_dir=tmp_path / "full", progress=False)
    train(copy.deepcopy(cfg), run_dir=tmp_path / "split", progress=False, stop_at=stop_at)
    train(copy.deepcopy(cfg), resume=tmp_path / "split", progress=False)
    return _train_losses(tmp_path / "full"), _train_losses(tmp_path / "split")


def test_exact_resume(tiny_cfg, tiny_dataset, tmp_path):
    cfg = _cfg(tiny_cfg, tiny_dataset, log_interval=1, max_steps=16, eval_interval=4)
    cfg.model.dropout = 0.1  # dropout RNG must be restored too
    cfg.data.transpose = 3  # and the augmentation's draws
    full, split = _full_and_resumed(cfg, tmp_path, stop_at=7)
    assert sorted(full) == sorted(split) == list(range(1, 17))
    for s in range(1, 17):
        assert split[s] == pytest.approx(full[s], abs=1e-6), s


def test_exact_resume_with_riffs_sampled_during_training(tiny_cfg, tiny_dataset, tmp_path, monkeypatch):
    """A riff sampled at step 4 (after the checkpoint a resume starts from) leaves the run's dropout stream and
    train mode alone, even when the sampling code draws from the global RNG or switches the model to eval."""
    import guitarformer.training.progress as progress

    real = progress.generate_riff

    def sampler_with_side_effects(model, *a, **k):
        torch.rand(5)  # e.g. a lazily built module's random init
        model.eval()
        return real(model, *a, **k)

    monkeypatch.setattr(progress, "generate_riff", sampler_with_side_effects)
    cfg = _cfg(tiny_cfg, tiny_dataset, log_interval=1, max_steps=8, eval_interval=4, sample_interval=4)
    cfg.model.dropout = 0.2
    full, split = _full_and_resumed(cfg, tmp_path, stop_at=4)
    assert sorted(full) == sorted(split) == list(range(1, 9))
    for s in range(5, 9):
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
    assert losses[max(losses)] < losses[1]
    assert res["best_val_loss"] < _untrained_val_loss(cfg, tiny_dataset) - 1.5  # 5.92 -> 3.38 nats/token


def test_bf16_autocast_on_cpu(tiny_cfg, tiny_dataset, tmp_path):
    cfg = _cfg(tiny_cfg, tiny_dataset, dtype="bfloat16", max_steps=10, eval_interval=10)
    res = train(cfg, run_dir=tmp_path / "bf16", progress=False)
    assert res["best_val_loss"] < _untrained_val_loss(cfg, tiny_dataset) - 0.5  # 5.87 -> 5.10 nats/token


def test_nonfinite_loss_stops_with_message(tiny_cfg, tiny_dataset, tmp_path):
    cfg = _cfg(tiny_cfg, tiny_dataset, lr=1e12, warmup_steps=1, grad_clip=0.0, max_steps=20, eval_interval=2)
    with pytest.raises(GuitarformerError, match="training loss became"):
        train(cfg, run_dir=tmp_path / "nan", progress=False)


@pytest.mark.slow
def test_ddp_two_processes_on_gloo(tiny_dataset, tmp_path):
    """Real DDP through torchrun on CPU: both ranks step in lock-step and rank 0 writes one run."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "guitarformer", "train", "--config", "tiny", "--data", str(tiny_dataset),
           "--run-dir", str(tmp_path / "ddp"), "--max-steps", "6", "--device", "cpu",
           "--set", "train.eval_interval=3"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    state = load_checkpoint(tmp_path / "ddp" / "ckpt" / "last.pt")
    assert state["step"] == 6 and len(state["rng"]["data"]) == 2
    assert "cpu x2" in r.stdout


_DDP_RESUME_DRIVER = """
    import copy, sys
    from pathlib import Path

    import torch
    import torch.distributed

    from guitarformer.config import load_config
    from guitarformer.runtime import teardown_distributed
    from guitarformer.training.loop import train

    out = Path(sys.argv[2])
    cfg = load_config("tiny", [f"data.dataset={sys.argv[1]}", "model.dropout=0.2", "train.device=cpu",
                               "train.max_steps=8", "train.eval_interval=4", "train.log_interval=1"])

    def draws(tag):  # the next numbers each rank's dropout would get
        rank = torch.distributed.get_rank()
        torch.save(torch.rand(16), out / f"{tag}-rank{rank}.pt")

    train(copy.deepcopy(cfg), run_dir=out / "full", progress=False)
    draws("full")
    train(copy.deepcopy(cfg), run_dir=out / "split", progress=False, stop_at=4)
    train(copy.deepcopy(cfg), resume=out / "split", progress=False)
    draws("resumed")
    teardown_distributed()  # as the CLI does: a rank leaving with gloo's threads running can abort at exit
"""


@pytest.mark.slow
def test_ddp_resume_gives_each_rank_its_own_random_streams(tiny_dataset, tmp_path):
    """Two gloo ranks with dropout, interrupted at step 4 and resumed: each rank's dropout stream continues as it
    would have without the interruption (the ranks' streams differ), so the losses match step for step."""
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(_DDP_RESUME_DRIVER))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(driver), str(tiny_dataset), str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    full = [torch.load(tmp_path / f"full-rank{k}.pt") for k in (0, 1)]
    resumed = [torch.load(tmp_path / f"resumed-rank{k}.pt") for k in (0, 1)]
    assert not torch.equal(full[0], full[1])  # the ranks draw different dropout masks
    assert not torch.equal(resumed[0], resumed[1])
    for k in (0, 1):
        assert torch.equal(resumed[k], full[k]), f"rank {k}'s random stream changed across the resume"
    a, b = _train_losses(tmp_path / "full"), _train_losses(tmp_path / "split")
    assert sorted(a) == sorted(b) == list(range(1, 9))
    for s in range(1, 9):
        assert b[s] == pytest.approx(a[s], abs=1e-6), s
    state = torch.load(tmp_path / "split" / "ckpt" / "last.pt", weights_only=True)
    assert [len(state["rng"][k]) for k in ("data", "torch")] == [2, 2]


def test_resume_on_another_number_of_ranks_keeps_going(tiny_cfg, tiny_dataset, tmp_path):
    """A checkpoint with two ranks' streams resumes in one process: rank 0 takes its own and says it is not exact."""
    cfg = _cfg(tiny_cfg, tiny_dataset, max_steps=6, eval_interval=3)
    train(copy.deepcopy(cfg), run_dir=tmp_path / "r", progress=False, stop_at=3)
    ck = tmp_path / "r" / "ckpt" / "last.pt"
    state = load_checkpoint(ck)
    rng = state["rng"]
    state["rng"] = {"data": [rng["data"], rng["data"]], "torch": [rng["torch"], torch.get_rng_state()], "cuda": None}
    save_checkpoint(ck, state)
    res = train(cfg, resume=tmp_path / "r", progress=False)
    assert res["step"] == 6


def test_more_torchrun_ranks_than_gpus_is_one_clear_error(monkeypatch):
    """torchrun --nproc_per_node=2 on a one-GPU machine: every rank stops before the process group with one message
    naming both numbers and the fixes, instead of rank 1's `CUDA error: invalid device ordinal`."""
    from guitarformer import runtime

    def invalid_ordinal(i):
        raise RuntimeError("CUDA error: invalid device ordinal")

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", invalid_ordinal)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    for rank in (1, 0):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        monkeypatch.setattr(torch.distributed, "get_rank", lambda rank=rank: rank)
        with pytest.raises(GuitarformerError) as e:
            runtime.setup_distributed("auto")
        assert "2 ranks per node" in e.value.problem and "1 GPU" in e.value.problem
        assert "--nproc_per_node=1" in e.value.fix and "--device cpu" in e.value.fix
    # the fix works: on CPU the ranks use gloo and never touch a GPU
    d = runtime.setup_distributed("cpu")
    assert (d.rank, d.world, d.local_rank) == (0, 2, 0)


def test_config_keeps_the_dataset_path_absolute(tiny_cfg, tiny_dataset, tmp_path, monkeypatch):
    """--data prep2 (relative): config.yaml and the checkpoint name the folder itself, so `--resume` and `eval`
    work from any folder."""
    import shutil

    shutil.copytree(tiny_dataset, tmp_path / "work" / "prep2")
    monkeypatch.chdir(tmp_path / "work")
    cfg = _cfg(tiny_cfg, "prep2", max_steps=4, eval_interval=2)
    train(copy.deepcopy(cfg), run_dir=tmp_path / "run", progress=False, stop_at=2)
    saved = load_config(str(tmp_path / "run" / "config.yaml")).data.dataset
    assert saved == str(tmp_path / "work" / "prep2")
    assert load_checkpoint(tmp_path / "run" / "ckpt" / "last.pt")["config"]["data"]["dataset"] == saved
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert train(cfg, resume=tmp_path / "run", progress=False)["step"] == 4


def _cli(*args):
    from guitarformer.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_max_steps_below_one_is_refused(tiny_dataset, tmp_path, steps):
    r = _cli("train", "--config", "tiny", "--data", tiny_dataset, "--run-dir", tmp_path / "r", "--max-steps", steps)
    assert r.exit_code == 2 and "--max-steps" in r.output and "x>=1" in r.output, r.output
    assert "next:" not in r.output and not (tmp_path / "r").exists()
    r = _cli("train", "--config", "tiny", "--data", tiny_dataset, "--run-dir", tmp_path / "r",
             "--set", f"train.max_steps={steps}")
    assert r.exit_code == 2 and "train.max_steps is" in r.stderr and "fix:" in r.stderr, r.output
    assert "next:" not in r.output and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_new_run_never_trains_over_an_old_one(tiny_cfg, tiny_dataset, tmp_path):
    run = tmp_path / "run"
    cfg = _cfg(tiny_cfg, tiny_dataset, max_steps=4, eval_interval=2, log_interval=1)
    train(copy.deepcopy(cfg), run_dir=run, progress=False)
    before = {p: p.read_bytes() for p in (run / "metrics.jsonl", run / "ckpt" / "last.pt")}
    with pytest.raises(GuitarformerError) as e:
        train(copy.deepcopy(cfg), run_dir=run, progress=False)
    assert "already holds a run" in e.value.problem
    assert f"--resume {run}" in e.value.fix and "--force" in e.value.fix and "new --run-dir" in e.value.fix
    assert all(p.read_bytes() == b for p, b in before.items())  # untouched
    # the CLI says the same in one line; --force starts afresh there
    r = _cli("train", "--config", "tiny", "--data", tiny_dataset, "--run-dir", run, "--max-steps", "3")
    assert r.exit_code == 2 and "already holds a run" in r.stderr and "--force" in r.stderr, r.output
    r = _cli("train", "--config", "tiny", "--data", tiny_dataset, "--run-dir", run, "--max-steps", "3", "--force")
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(d["kind"], d["step"]) for d in rows] == [("train", 1), ("perf", 1), ("val", 3)]  # the new run's only
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == 3
    # an empty folder, or one with other files, is fine
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("my run")
    train(copy.deepcopy(cfg), run_dir=tmp_path / "empty", progress=False)
    assert (tmp_path / "empty" / "notes.txt").read_text() == "my run"


def test_validating_on_training_data_is_said_and_tagged(tiny_run, capsys, tiny_cfg, tiny_dataset, tmp_path):
    """A dataset too small for a val split: the run warns, says what to do, and tags its val numbers."""
    import shutil

    import numpy as np

    ds = tmp_path / "ds"  # the tiny corpus with its val split emptied
    shutil.copytree(tiny_dataset, ds)
    (ds / "val.bin").write_bytes(b"")
    np.save(ds / "val.idx.npy", np.zeros(1, dtype=np.int64))
    meta = json.loads((ds / "meta.json").read_text())
    meta["tokens"]["val"], meta["sequences"]["val"] = 0, 0
    (ds / "meta.json").write_text(json.dumps(meta))
    cfg = _cfg(tiny_cfg, ds, max_steps=2, eval_interval=2)
    res = train(cfg, run_dir=tmp_path / "r", progress=False)
    out = capsys.readouterr().out
    assert f"dataset {ds} has no validation files (" in out
    assert "validating on training data" in out and "add files" in out
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    val = [d for d in rows if d["kind"] == "val"]
    assert val and all(d["split"] == "train" for d in val)
    assert all(0.0 < d["accuracy"] < 1.0 for d in val)
    assert res["val_split"] == "train"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["val_split"] == "train"


def test_dataset_with_every_file_held_out_says_so(tiny_dataset, tmp_path):
    """Files that all landed in val: 'no training tokens' says why and what to do."""
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(tiny_dataset, ds)
    for ext in (".bin", ".idx.npy"):  # the train split becomes the val split; train is left empty
        (ds / f"train{ext}").replace(ds / f"val{ext}")
        shutil.copyfile(ds / f"test{ext}", ds / f"train{ext}")
    meta = json.loads((ds / "meta.json").read_text())
    for k in ("tokens", "sequences"):
        meta[k]["val"], meta[k]["train"] = meta[k]["train"], 0
    (ds / "meta.json").write_text(json.dumps(meta))
    r = _cli("train", "--config", "tiny", "--data", ds, "--run-dir", tmp_path / "r")
    assert r.exit_code == 2 and "no training tokens" in r.stderr, r.output
    held = sum(meta["sequences"].values())
    assert f"{held} sequence(s) all landed in the val/test splits" in r.stderr and "add more files" in r.stderr


def test_raw_music_folder_as_data_suggests_a_separate_dataset_folder(tmp_path, cache_root):
    raw = tmp_path / "my-tabs"
    raw.mkdir()
    (raw / "song.txt").write_text("e|---0---|\nB|---1---|\nG|---0---|\nD|---2---|\nA|---3---|\nE|-------|\n")
    r = _cli("train", "--config", "tiny", "--data", raw)
    assert r.exit_code == 2 and "not a prepared dataset" in r.stderr, r.output
    assert "--out data/prepared/my-tabs" in r.stderr and f"--out {raw}" not in r.stderr


def test_new_run_dirs_are_distinct_and_newest_run_is_the_last_written(tmp_path):
    import time

    from guitarformer.runs import new_run_dir, newest_run

    made = [new_run_dir(tmp_path / "runs") for _ in range(3)]  # the same second: -1, -2 suffixes
    assert len(set(made)) == 3 and all(p.is_dir() for p in made)
    old, new = made[0], made[1]
    for run, t in ((old, 2000), (new, 1000)):  # the older folder was resumed last
        (run / "ckpt").mkdir()
        (run / "ckpt" / "last.pt").write_bytes(b"x")
        os.utime(run / "ckpt" / "last.pt", (t, t))
    now = time.time()
    os.utime(new, (now, now))
    os.utime(old, (now - 100, now - 100))
    assert newest_run(tmp_path / "runs") == old


def test_validation_reads_the_plain_stream(tiny_cfg, tiny_dataset):
    """A run with controls and infilling validates on the tokens a plain run scores: no control tokens, no fill
    examples, the same targets and notes as the plain dataset of the same tunes; its NLL per note is its nats
    over those notes."""
    from guitarformer.vocab.controls import control_kinds
    from guitarformer.data.corpus import ensure_builtin_dataset

    cfg = copy.deepcopy(tiny_cfg)
    set_values(cfg, {"data.controls": True, "data.infill": 0.3})
    controlled = ensure_builtin_dataset(cfg.data, progress=False)
    assert controlled != tiny_dataset
    counts = []
    for ds in (controlled, tiny_dataset):
        c = copy.deepcopy(cfg)
        c.data.dataset = str(ds)
        data = Data(c, ds)
        is_control = control_kinds(data.tokenizer.vocab, len(data.tokenizer)) >= 0
        xs = [(x, y) for x, y in data.val.eval_batches(4)]
        assert not any(is_control[x.numpy()].any() for x, _ in xs)
        targets = sum(int((y != IGNORE_INDEX).sum()) for _, y in xs)
        notes = sum(int(np.isin(y.numpy(), data.note_ids).sum()) for _, y in xs)
        counts.append((targets, notes))
        c.model.vocab_size = len(data.tokenizer)
        r = evaluate(build_model(c.model), data, "decoder", torch.device("cpu"), torch.float32, 4)
        assert r["tokens"] == targets and r["nats_per_note"] == pytest.approx(r["loss"] * targets / notes)
    assert counts[0] == counts[1] and counts[0][1] > 0
