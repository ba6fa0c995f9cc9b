"""train: one readable loop for both model kinds — AMP, DDP, exact resume, atomic checkpoints, TensorBoard.

`train()` at the bottom reads top to bottom: set the run up (device, data, run directory, model, state), then per
step: learning rate, forward/backward over grad_accum micro-batches, optimizer step, logs; at an evaluation:
validate, checkpoint, early stopping. What a resume needs lives in TrainState (training/state.py).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from guitarformer.config import Config, apply_overrides, save_config, set_values
from guitarformer.data.dataset import Seq2SeqPairs
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.compose.form import forms_of_dataset, write_forms
from guitarformer.models import build_model
from guitarformer.models.kinds import kind_of
from guitarformer.models.loss import nll
from guitarformer.training.styles import STYLE_PREFIX, nats_per_note_by_style
from guitarformer.runs import Run, RunDir, new_run_dir
from guitarformer.runs.migrate import read_saved
from guitarformer.runs.rundir import RunState
from guitarformer.runtime import (
    Dist,
    autocast_ctx,
    peak_flops,
    resolve_device,
    resolve_dtype,
    set_threads,
    setup_distributed,
    step_work,
)
from guitarformer.runs.checkpoint import load_checkpoint, save_checkpoint
from guitarformer.training.micro_batch import fit_on_gpu
from guitarformer.training.budget import Budget
from guitarformer.training.data import Data, resolve_dataset
from guitarformer.training.init import check_tokens, init_config, init_record, init_weights, load_init
from guitarformer.training.progress import RunLog
from guitarformer.training.ranks import any_rank, mean_over_ranks, on_main
from guitarformer.training.state import (
    TrainState,
    checkpoint_dict,
    new_state,
    restore,
    rng_states,
    saved_world,
)


WARMUP_SHARE = 0.1  # the warm-up takes at most this share of max_steps


def warmup_steps(t) -> int:
    """The warm-up a run of t.max_steps takes: train.warmup_steps, but at most a tenth of the run (at least one step
    where any is asked), so a short run (a 40-step fine-tune) reaches its learning rate and decays from it."""
    if t.warmup_steps <= 0:
        return 0
    return max(1, min(t.warmup_steps, int(t.max_steps * WARMUP_SHARE)))


def lr_at(step: int, cfg) -> float:
    """Linear warm-up (`warmup_steps`), then cosine decay to min_lr at max_steps."""
    t = cfg.train
    warm = warmup_steps(t)
    if step < warm:
        return t.lr * (step + 1) / warm
    if step >= t.max_steps:
        return t.min_lr
    ratio = (step - warm) / max(1, t.max_steps - warm)
    return t.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (t.lr - t.min_lr)


# ---------------------------------------------------------------- data


def evaluate(model, data: Data, kind: str, device, dtype, batch_size: int, max_batches: int = 0) -> dict[str, float]:
    """Token-weighted NLL, perplexity and next-token accuracy over the val source, and NLL per note (nats over the
    notes among the targets; None where notes cannot be counted: BPE)."""
    api = kind_of(kind)
    notes = [0]

    def counted(batches):
        for b in batches:
            inputs = api.inputs(b)
            if data.note_ids is not None:
                notes[0] += int(torch.isin(inputs.targets, torch.from_numpy(data.note_ids)).sum())
            yield inputs

    r = nll(model, counted(data.val.eval_batches(batch_size, max_batches)), device,
            lambda: autocast_ctx(device, dtype))
    per_note = r["nll"] * r["tokens"] / notes[0] if notes[0] else None
    return {"loss": r["nll"], "ppl": r["ppl"], "accuracy": r["accuracy"], "tokens": r["tokens"],
            "nats_per_note": per_note}


def eval_batch_count(data: Data, cfg: Config) -> int:
    """About how many batches one evaluation reads (the budget's estimate before one is timed)."""
    B, n = cfg.train.batch_size, cfg.train.eval_iters
    if isinstance(data.val, Seq2SeqPairs):
        total = math.ceil(len(data.val.cut_points) / 8 / B)  # eval_batches' stride
    else:
        total = math.ceil(len(data.val.split) / cfg.model.block_size / B)
    return min(total, n) if n else total


def compile_or_eager(raw, data: Data, kind: str, batch_size: int, device, dtype, verbose: bool):
    """torch.compile(raw), checked on one training step; the eager model where this machine cannot compile
    (no C++ compiler, an unsupported backend): a slower run beats a failed one."""
    compiled = torch.compile(raw)
    probe = data.train.batch(batch_size, torch.Generator().manual_seed(0))  # leaves the data order alone
    inputs = kind_of(kind).inputs(probe).to(device)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # nor the dropout RNG
            with autocast_ctx(device, dtype):
                _, loss = inputs(compiled)
            loss.backward()
        return compiled
    except Exception as e:  # inductor raises many types; all mean "run eagerly"
        if verbose:
            print(f"guitarformer: torch.compile failed here ({type(e).__name__}); training without it", flush=True)
        return raw
    finally:
        raw.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- the run directory


def load_resume_checkpoint(run_dir: Path) -> dict[str, Any]:
    ck = RunDir(run_dir).checkpoint("last")
    if not ck.is_file():
        raise GuitarformerError(f"run {run_dir} has no checkpoint to resume (ckpt/last.pt missing)",
                                "pass a run directory written by `guitarformer train`")
    return load_checkpoint(ck)


def prepare_run_dir(run_dir: Path | None, cfg: Config, dataset: Path, resumed: bool, force: bool) -> Path:
    """The run directory with config.yaml and tokenizer.json written (rank 0's job).

    A new run never trains over another one's checkpoints and logs: that needs `force`, which deletes them first.
    """
    where = run_dir or "runs/"
    try:
        run_dir = Path(run_dir) if run_dir else new_run_dir()
        if not resumed:
            found = [p for p in RunDir(run_dir).outputs() if p.exists()]
            if found and not force:
                raise GuitarformerError(
                    f"{run_dir} already holds a run ({', '.join(p.name for p in found)}); training there would overwrite its "
                    "checkpoints and mix its metrics with the new run's",
                    f"continue it with `guitarformer train --resume {run_dir}`, pick a new --run-dir, or add --force "
                    "to start afresh there (its checkpoints and logs are deleted)")
            for p in found:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        rd, data = RunDir(run_dir), RunDir(dataset)  # a dataset folder holds its tokenizer and counts as a run does
        rd.ckpt_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, rd.config_path)
        if not resumed:
            rd.write_state(RunState())
        shutil.copyfile(data.tokenizer_path, rd.tokenizer_path)
        if data.seen_path.is_file():  # the control values it trains on: kept if the dataset moves or goes
            shutil.copyfile(data.seen_path, rd.seen_path)
        forms = forms_of_dataset(dataset, load_tokenizer(data.tokenizer_path))
        if forms is not None:  # which bars of its tunes repeat which: the forms `sample --form auto` draws
            write_forms(run_dir, forms)
    except OSError as e:  # a run dir under a file, no permission, a full disk: before any training time is spent
        raise GuitarformerError(f"cannot write the run directory {where}: {e.strerror or e}",
                                "pass a writable --run-dir (a folder, not a file), or free disk space") from e
    return run_dir


# ---------------------------------------------------------------- one step, one evaluation


def forward_backward(model, data: Data, state: TrainState, cfg: Config, device, dtype, dist: Dist) -> float:
    """grad_accum micro-batches forward and backward (DDP syncs gradients on the last); this rank's mean loss."""
    B, A = cfg.train.batch_size, cfg.train.grad_accum
    api = kind_of(cfg.model.kind)
    loss_sum = 0.0
    for micro in range(A):
        inputs = api.inputs(data.train.batch(B, state.data_rng)).to(device)
        sync = nullcontext() if (dist.world == 1 or micro == A - 1) else model.no_sync()
        with sync:
            with autocast_ctx(device, dtype):
                _, loss = inputs(model)
            state.scaler.scale(loss / A).backward()
        loss_sum += loss.detach().float().item() / A
    return loss_sum


def optimizer_step(model, state: TrainState, grad_clip: float) -> float:
    """Clip, step, zero the gradients; the gradient norm before clipping."""
    state.scaler.unscale_(state.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip > 0 else float("inf"))
    state.scaler.step(state.optimizer)
    state.scaler.update()
    state.optimizer.zero_grad(set_to_none=True)
    return float(grad_norm)


def validate(raw, data: Data, cfg: Config, device, dtype, dist: Dist) -> dict[str, float]:
    """Val numbers of the plain module (eager: no recompiles for eval shapes), measured on rank 0 and shared, so
    early stopping and best.pt decide alike on every rank."""
    val = evaluate(raw, data, cfg.model.kind, device, dtype, cfg.train.batch_size, cfg.train.eval_iters) \
        if dist.main else None
    if dist.world > 1:
        box = [val]
        torch.distributed.broadcast_object_list(box, src=0)
        val = box[0]
    return val


def save_checkpoints(ckpt_dir: Path, raw, state: TrainState, cfg: Config, dist: Dist, device, best: bool) -> None:
    """ckpt/last.pt, and ckpt/best.pt too when `best`. Every rank calls it (its random streams go in); rank 0 writes."""
    rng = rng_states(state, dist, device)
    if dist.main:
        ck, rd = checkpoint_dict(raw, state, cfg, rng), RunDir(ckpt_dir.parent)
        save_checkpoint(rd.checkpoint("last"), ck)
        if best:
            save_checkpoint(rd.checkpoint("best"), ck)


class _Stop:
    """SIGTERM/SIGINT set a flag; the loop saves a checkpoint and exits at the next step boundary."""

    def __init__(self):
        self.signal: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self):
        for s in (signal.SIGTERM, signal.SIGINT):
            try:
                self._old[s] = signal.signal(s, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, frame):
        if self.signal is not None and signum == signal.SIGINT:  # second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.signal = signum

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)


# ---------------------------------------------------------------- the loop


@dataclass
class Training:
    """One training run in progress, set up: where it runs, its data, directory, model (plain and wrapped), state and log."""

    cfg: Config
    dist: Dist
    device: torch.device
    dtype: torch.dtype
    data: Data
    run_dir: Path
    raw: torch.nn.Module  # the plain module: evaluation, checkpoints and samples use it
    model: torch.nn.Module  # what trains: raw, compiled and/or under DDP
    state: TrainState
    log: RunLog
    resumed: bool
    init: Run | None = None  # the run this one started from (train.init), None for random weights or a resume
    init_record: dict[str, Any] | None = None  # what summary.json says of it (training/init.py init_record)
    data_s: float = 0.0  # seconds spent finding or building the dataset (outside the time budget)

    @property
    def ckpt_dir(self) -> Path:
        return RunDir(self.run_dir).ckpt_dir

    @property
    def tokens_per_step(self) -> int:
        t = self.cfg.train
        return t.batch_size * t.grad_accum * self.cfg.model.block_size * self.dist.world


def resumed_config(cfg: Config, resume: str | Path | None, overrides: list[str] | None
                   ) -> tuple[Config, dict[str, Any] | None]:
    """(the config to train with, the checkpoint to resume from or None): a resumed run takes its own config,
    changed by `overrides`."""
    if resume is None:
        return cfg, None
    ckpt = load_resume_checkpoint(Path(resume))
    cfg, state = read_saved(ckpt["config"], RunDir(resume))
    ckpt.setdefault("budget_fitted", state.budget_fitted)  # a run of format 1 kept it in its config
    return apply_overrides(cfg, overrides or []), ckpt


def set_up(cfg: Config, run_dir: str | Path | None, ckpt: dict[str, Any] | None, progress: bool, force: bool,
           init: Run | None = None) -> Training:
    """Device and threads, data, the run directory (its config knows the vocabulary and the dataset's full path),
    then the model and its state: fresh (from `init`'s weights where given), or exactly where the checkpoint left
    off."""
    t = cfg.train
    dist = setup_distributed(t.device)
    device = resolve_device(t.device, dist)
    dtype = resolve_dtype(t.dtype, device)
    torch.manual_seed(t.seed + dist.rank)  # each rank its own dropout masks
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    t_data = time.time()
    dataset = resolve_dataset(cfg, dist, progress)
    data_s = time.time() - t_data
    if init is not None:  # before the data's own checks and the run directory: other tokens are the first problem
        check_tokens(init, load_tokenizer(dataset / "tokenizer.json"), dataset)
    data = Data(cfg, dataset)
    V = len(data.tokenizer)
    if cfg.model.vocab_size not in (0, V):
        raise GuitarformerError(f"model.vocab_size={cfg.model.vocab_size} but the dataset's tokenizer has {V} tokens",
                                "leave model.vocab_size at 0 so it is taken from the dataset")
    # What the run learns of its data, set as every change to a config is (typed, validated): the vocabulary, and
    # the dataset's absolute path, so `eval` and `--resume` work from any folder.
    set_values(cfg, {"model.vocab_size": V, "data.dataset": str(dataset.resolve())})
    run_dir = on_main(dist, lambda: prepare_run_dir(run_dir, cfg, dataset, resumed=ckpt is not None, force=force))

    raw = build_model(cfg.model).to(device)
    record = None if init is None else init_record(init, init_weights(raw, init, data.tokenizer))
    if device.type == "cpu":  # train.num_threads, else what this machine's idle cores can run
        set_threads(t.num_threads, step_work(raw, t.batch_size * cfg.model.block_size),
                    processes=int(os.environ.get("LOCAL_WORLD_SIZE", dist.world)))
    state = new_state(raw, cfg, device, dtype, dist.rank)
    if ckpt is not None:
        restore(raw, state, ckpt, dist.rank, device, where=str(RunDir(run_dir).checkpoint("last")))
    fit = fit_on_gpu(raw, data, cfg.model.kind, t.batch_size, t.grad_accum, device, dtype)
    if fit != (t.batch_size, t.grad_accum):  # the same tokens per step, in more passes
        if dist.main:
            print(f"guitarformer: batch {t.batch_size} does not fit on this GPU: {fit[1]} passes of {fit[0]}", flush=True)
        set_values(cfg, {"train.batch_size": fit[0], "train.grad_accum": fit[1]})
    model = compile_or_eager(raw, data, cfg.model.kind, t.batch_size, device, dtype, dist.main) if t.compile else raw
    if dist.world > 1:
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    log = RunLog(run_dir if dist.main else None, resumed_at=state.step if ckpt is not None else None)
    return Training(cfg, dist, device, dtype, data, run_dir, raw, model, state, log, resumed=ckpt is not None,
               init=init, init_record=record, data_s=data_s)


def announce(run: Training, ckpt: dict[str, Any] | None) -> None:
    """Rank 0 says what trains where on what, and warns about a resume on another world size or no val files."""
    if not run.dist.main:
        return
    cfg, dist, data = run.cfg, run.dist, run.data
    n = run.raw.num_params(non_embedding=False)
    where = f"{run.device.type}" + (f" x{dist.world}" if dist.world > 1 else "") + \
        f", {str(run.dtype).replace('torch.', '')}"
    print(f"guitarformer: {cfg.model.kind} {n / 1e6:.2f}M params, vocab {cfg.model.vocab_size}, context "
          f"{cfg.model.block_size}, on {where}; data {data.dataset} ({len(data.train.split):,} train tokens); run "
          f"{run.run_dir}" + (f"; resumed at step {run.state.step}" if ckpt is not None else ""), flush=True)
    print(f"guitarformer: {schedule_line(cfg.train)}", flush=True)
    if ckpt is not None and saved_world(ckpt) != dist.world:
        print(f"guitarformer: the checkpoint was written by {saved_world(ckpt)} process(es) and resumes on "
              f"{dist.world}: training goes on, but not step for step as it would have", flush=True)
    if data.val_is_train:
        print(f"guitarformer: warning: {data.val_warning()}", flush=True)
        run.log.text("warning", data.val_warning(), run.state.step)


def schedule_line(t) -> str:
    """The learning-rate schedule as it will run, for the log."""
    warm = warmup_steps(t)
    capped = f" (train.warmup_steps {t.warmup_steps}, at most a tenth of the run)" if warm < t.warmup_steps else ""
    return (f"learning rate {t.lr:g}: warm-up {warm} step(s){capped}, then cosine decay to {t.min_lr:g} at step "
            f"{t.max_steps}")


def announce_init(run: Training) -> None:
    """Say what the run starts from, and the init model's val loss on this data (logged at step 0): where a
    fine-tune starts, not where random weights would."""
    init = run.init
    val = validate(run.raw, run.data, run.cfg, run.device, run.dtype, run.dist)
    run.log.scalars("val", 0, extra={"split": run.data.val_split}, loss=val["loss"], ppl=val["ppl"],
                    accuracy=val["accuracy"])
    record = run.init_record
    record["val_loss_at_init"] = val["loss"]
    if run.dist.main:
        RunDir(run.run_dir).init_path.write_text(json.dumps(record, indent=2))  # a resume's summary reads it
        added = f" + {', '.join(record['added_tokens'])}" if record["added_tokens"] else ""
        print(f"guitarformer: initialised from {init.name} ({init.checkpoint}, step {record['step']}); vocabulary "
              f"{len(init.tokenizer)}{added}; val loss at step 0 {val['loss']:.4f} nats/token", flush=True)


class Throughput:
    """Training and performance scalars every log_interval steps: loss, lr, gradient norm, throughput, model FLOPs
    utilisation."""

    def __init__(self, run: Training):
        self.run, self.last, self.tokens = run, time.time(), 0
        self.flops_tok, self.peak = run.raw.flops_per_token(), peak_flops(run.device)

    def step(self, step: int, loss: float, lr: float, grad_norm: float, bar, last_val: dict | None) -> None:
        run = self.run
        self.tokens += run.tokens_per_step
        if not (step % run.cfg.train.log_interval == 0 or step == 1):
            return
        tps = self.tokens / max(time.time() - self.last, 1e-9)
        perf = {"mfu": self.flops_tok * tps / (self.peak * run.dist.world)} if self.peak else {}
        if run.device.type == "cuda":  # what the run needs of the card, for choosing batch and context
            perf["peak_mem_gib"] = torch.cuda.max_memory_allocated(run.device) / 2**30
        run.log.scalars("train", step, loss=loss, lr=lr, grad_norm=grad_norm)
        run.log.scalars("perf", step, tokens_per_s=tps, **perf)
        self.last, self.tokens = time.time(), 0
        bar.set_postfix(loss=f"{loss:.3f}", val=f"{last_val['loss']:.3f}" if last_val else "-")


def train_step(run: Training) -> tuple[float, float, float]:
    """One optimizer step at the scheduled learning rate: (this rank's loss, lr, gradient norm); a loss that is not
    finite stops the run before the step is taken."""
    state, t = run.state, run.cfg.train
    lr = lr_at(state.step, run.cfg)
    for g in state.optimizer.param_groups:
        g["lr"] = lr
    loss = forward_backward(run.model, run.data, state, run.cfg, run.device, run.dtype, run.dist)
    if not math.isfinite(loss):
        raise GuitarformerError(
            f"training loss became {loss} at step {state.step}; stopped without saving the bad weights "
            f"(the last good checkpoint is {run.ckpt_dir / 'last.pt'})",
            "lower train.lr, raise train.warmup_steps, or use --set train.dtype=float32")
    grad_norm = optimizer_step(run.model, state, t.grad_clip)
    state.step += 1
    return loss, lr, grad_norm


def evaluation(run: Training, budget: Budget, bar, save_s: float) -> tuple[dict[str, float], bool, float]:
    """Validate, log, let the budget fit max_steps again (this evaluation's time with `save_s`, the last checkpoint
    save's), checkpoint (best.pt on an improvement); (the val numbers, whether patience is spent, this save's s)."""
    state, t = run.state, run.cfg.train
    t0 = time.time()
    val = validate(run.raw, run.data, run.cfg, run.device, run.dtype, run.dist)
    per_note = {"nats_per_note": val["nats_per_note"]} if val["nats_per_note"] is not None else {}
    run.log.scalars("val", state.step, extra={"split": run.data.val_split},
                    loss=val["loss"], ppl=val["ppl"], accuracy=val["accuracy"], **per_note)
    budget.after_eval(state.step, time.time() - t0, save_s, bar)
    improved = state.record_eval(val["loss"])
    t0 = time.time()
    save_checkpoints(run.ckpt_dir, run.raw, state, run.cfg, run.dist, run.device, best=improved)
    return val, state.patience_spent(t.patience) and state.step < t.max_steps, time.time() - t0


def loop(run: Training, progress: bool, stop_at: int | None, t_start: float) -> tuple[str | None, dict | None]:
    """Steps until max_steps, early stopping, the clock, a signal or `stop_at`: (what stopped it, last val)."""
    t, state, dist = run.cfg.train, run.state, run.dist
    budget = Budget(run.cfg, dist, run.device, run.run_dir, t_start, eval_batch_count(run.data, run.cfg), state=state)
    perf = Throughput(run)
    last_val: dict[str, float] | None = None
    stopped_by: str | None = None
    save_s = 0.0

    def probe_eval() -> float:  # seconds of one val batch, for the budget
        t0 = time.time()
        evaluate(run.raw, run.data, run.cfg.model.kind, run.device, run.dtype, t.batch_size, max_batches=1)
        return time.time() - t0

    run.model.train()
    with _Stop() as stop, tqdm(total=t.max_steps, initial=state.step, desc="train", unit="step",
                               disable=not (progress and dist.main), dynamic_ncols=True) as bar:
        while state.step < t.max_steps:
            t0 = time.time()
            loss, lr, grad_norm = train_step(run)
            step = state.step
            budget.step(step, time.time() - t0, bar, probe_eval)
            bar.update(1)
            perf.step(step, mean_over_ranks(loss, dist, run.device), lr, grad_norm, bar, last_val)

            out_of_time, signalled = any_rank(  # the clock or a signal on one rank stops them all
                [budget.out_of_time(step),
                 stop.signal is not None], dist, run.device)
            sliced = stop_at is not None and step >= stop_at
            if step % t.eval_interval == 0 or step == t.max_steps or out_of_time or signalled or sliced:
                last_val, patience_spent, save_s = evaluation(run, budget, bar, save_s)
                if patience_spent:
                    stopped_by = f"early stopping (no val improvement in {t.patience} evaluations)"
                    break
                if t.sample_interval and step % t.sample_interval == 0:
                    t0 = time.time()
                    run.log.riff(run.raw, run.data.tokenizer, run.cfg, step, run.device)
                    budget.after_riff(time.time() - t0)
            stopped_by = stop_reason(stop.signal, out_of_time, signalled, sliced, stop_at)
            if stopped_by:
                break
    return stopped_by, last_val


def stop_reason(signum: int | None, out_of_time: bool, signalled: bool, sliced: bool,
                stop_at: int | None) -> str | None:
    """Why the loop stops after this step, or None to go on."""
    if signum:
        return "signal " + signal.Signals(signum).name
    if out_of_time:
        return "time budget (train.time_budget_min)"
    if signalled:
        return "a signal to another rank"
    if sliced:
        return f"stop_at={stop_at}"
    return None


def _styles_of_val(run: Training, interrupted: bool) -> dict[str, tuple[float, int]]:
    """A decoder's nats per note on each style's val pieces, where the dataset has styles and a val split of its
    own (the built-in corpus: rock, classical, the fiddle tune types); printed and kept in summary.json."""
    val = getattr(run.data.val, "split", None)
    if interrupted or not run.dist.main or run.cfg.model.kind != "decoder" or val is None or run.data.val_is_train \
            or not any(t.startswith(STYLE_PREFIX) for t in run.data.tokenizer.vocab):
        return {}
    with autocast_ctx(run.device, run.dtype):
        by_style = nats_per_note_by_style(run.raw, run.data.tokenizer, val, run.cfg.model.block_size, run.device)
    if by_style:
        print("guitarformer: val nats/note per style: " + ", ".join(f"{s} {v:.3f} ({n:,} notes)"
                                                                   for s, (v, n) in by_style.items()), flush=True)
    return by_style


def finish(run: Training, stopped_by: str | None, last_val: dict | None, seconds: float) -> dict[str, Any]:
    """The run's summary (summary.json), its hyper-parameters in TensorBoard, a last riff unless interrupted."""
    cfg, t, state, dist = run.cfg, run.cfg.train, run.state, run.dist
    interrupted = bool(stopped_by and stopped_by.startswith("signal"))
    summary = {
        "run_dir": str(run.run_dir), "step": state.step, "best_val_loss": state.best_val,
        "val_loss": last_val["loss"] if last_val else None,
        "val_nats_per_note": last_val["nats_per_note"] if last_val else None, "seconds": round(seconds, 1),
        "stopped_by": stopped_by, "device": run.device.type, "world": dist.world, "val_split": run.data.val_split,
    }
    by_style = _styles_of_val(run, interrupted)
    if by_style:
        summary["val_nats_per_note_by_style"] = {s: round(v, 4) for s, (v, _) in by_style.items()}
    if cfg.train.init:  # a fine-tune: what it started from (resumed, as its first segment wrote it)
        written = RunDir(run.run_dir).init_path
        summary["init"] = run.init_record if run.init_record is not None else \
            json.loads(written.read_text()) if written.is_file() else {"from": cfg.train.init}
    if dist.main:
        if not interrupted:
            run.log.riff(run.raw, run.data.tokenizer, cfg, state.step, run.device)
        run.log.close(
            {"kind": cfg.model.kind, "n_layer": cfg.model.n_layer, "n_embd": cfg.model.n_embd,
             "n_head": cfg.model.n_head, "block_size": cfg.model.block_size, "lr": t.lr,
             "batch_size": t.batch_size * t.grad_accum * dist.world, "pos": cfg.model.pos},
            {"hparam/best_val_loss": state.best_val, "hparam/steps": state.step})
        RunDir(run.run_dir).summary_path.write_text(json.dumps(summary, indent=2))
        ck = RunDir(run.run_dir).best_checkpoint()
        why = f" (stopped by {stopped_by})" if stopped_by else ""
        last = f" (last {last_val['loss']:.4f}" + (f", {last_val['nats_per_note']:.4f} nats/note" if
                                                  last_val["nats_per_note"] else "") + ")" if last_val else ""
        print(f"guitarformer: {state.step} steps in {seconds / 60:.1f} min{why}; best val loss {state.best_val:.4f} "
              f"nats/token{last} on the plain val stream; checkpoint {ck}\n"
              f"  next: guitarformer sample --run {run.run_dir} --out riff.mid", flush=True)
    if dist.world > 1:
        torch.distributed.barrier()
    if interrupted:
        summary["interrupted"] = True
    return summary


def train(cfg: Config, run_dir: str | Path | None = None, resume: str | Path | None = None,
          progress: bool = True, resume_overrides: list[str] | None = None,
          stop_at: int | None = None, force: bool = False) -> dict[str, Any]:
    """Train cfg.model on cfg.data; returns a summary (run_dir, best/last val loss, steps, seconds).

    With `resume`, the run's own config is used (cfg is ignored) and `resume_overrides` (`section.key=value`)
    may change it, e.g. train.max_steps to train longer. `stop_at` ends the run (with a checkpoint) after
    that many steps while keeping the schedule of train.max_steps: a pre-emptible job's slice. A `run_dir`
    that already holds a run is refused unless `force` (which deletes that run's checkpoints and logs).
    """
    t_start = time.time()  # the time budget counts from here: start-up and compilation included
    cfg, ckpt = resumed_config(cfg, resume, resume_overrides)
    if resume is not None:
        run_dir = Path(resume)
    init = load_init(cfg.train.init) if cfg.train.init and ckpt is None else None  # a resume has its own weights
    if init is not None:
        cfg = init_config(cfg, init)
    if cfg.train.max_steps < 1:
        raise GuitarformerError(f"train.max_steps is {cfg.train.max_steps}: a run needs at least one step",
                                "pass --max-steps 1 or more")
    run = set_up(cfg, run_dir, ckpt, progress, force, init)
    announce(run, ckpt)
    if init is not None:
        announce_init(run)
    t_start += run.data_s  # building the dataset is prepare's time, not training's
    stopped_by, last_val = loop(run, progress, stop_at, t_start)
    return finish(run, stopped_by, last_val, time.time() - t_start)
