"""train: one readable loop for both model kinds — AMP, DDP, exact resume, atomic checkpoints, TensorBoard."""

from __future__ import annotations

import json
import math
import shutil
import signal
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from guitarformer import IGNORE_INDEX
from guitarformer.config import Config, apply_overrides, from_dict, save_config
from guitarformer.data.corpus import ensure_builtin_dataset
from guitarformer.data.dataset import DecoderWindows, PitchShifter, Seq2SeqPairs, TokenSplit
from guitarformer.data.prepare import load_meta
from guitarformer.data.tokenization import bar_ids, load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.models import build_model
from guitarformer.runs import new_run_dir
from guitarformer.runtime import Dist, autocast_ctx, peak_flops, resolve_device, resolve_dtype, setup_distributed
from guitarformer.training.checkpoint import CKPT_VERSION, load_checkpoint, save_checkpoint, unwrap
from guitarformer.training.progress import log_riff


def lr_at(step: int, cfg) -> float:
    """Linear warmup, then cosine decay to min_lr at max_steps."""
    t = cfg.train
    if step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    if step >= t.max_steps:
        return t.min_lr
    ratio = (step - t.warmup_steps) / max(1, t.max_steps - t.warmup_steps)
    return t.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (t.lr - t.min_lr)


# ---------------------------------------------------------------- data


class Data:
    """Train/val sources for the configured model kind, with the tokenizer that made them."""

    def __init__(self, cfg: Config, dataset: Path):

        self.dataset = dataset
        self.tokenizer = load_tokenizer(dataset / "tokenizer.json")
        train = TokenSplit(dataset, "train")
        val = TokenSplit(dataset, "val")
        if len(train) < 2:
            raise GuitarformerError(f"dataset {dataset} has no training tokens",
                                    "prepare a folder with readable guitar files (see its manifest.jsonl for reasons)")
        self.val_is_train = len(val) < 2
        if self.val_is_train:
            val = train  # too few files for a held-out split: validation falls back to training data
        shifter = PitchShifter(self.tokenizer, cfg.data.transpose) if cfg.data.transpose > 0 else None
        m = cfg.model
        if m.kind == "decoder":
            self.train = DecoderWindows(train, m.block_size, shifter)
            self.val = DecoderWindows(val, m.block_size)
        else:
            args = (m.src_block_size, m.block_size, bar_ids(self.tokenizer), self.tokenizer["BOS_None"],
                    self.tokenizer.pad_token_id)
            self.train = Seq2SeqPairs(train, *args, shifter=shifter)
            self.val = Seq2SeqPairs(val, *args)


def resolve_dataset(cfg: Config, dist: Dist, progress: bool = True) -> Path:
    """The configured dataset folder, or the built-in corpus (prepared by rank 0 on first use)."""
    if cfg.data.dataset:

        p = Path(cfg.data.dataset).expanduser()
        load_meta(p)  # clear error when missing or incomplete
        return p

    if dist.main:
        path = ensure_builtin_dataset(cfg.data, progress=progress)
    if dist.world > 1:
        torch.distributed.barrier()
    if not dist.main:
        path = ensure_builtin_dataset(cfg.data, progress=False)
    return path


def model_inputs(kind: str, batch, device):
    """(args, targets) for model(*args, targets=targets) from a batch of either data source."""
    if kind == "decoder":
        x, y = (t.to(device, non_blocking=True) for t in batch)
        return (x,), {}, y
    src, mask, tgt, y = (t.to(device, non_blocking=True) for t in batch)
    return (src, tgt), {"src_key_mask": mask}, y


@torch.no_grad()
def evaluate(model, data: Data, kind: str, device, dtype, batch_size: int, max_batches: int = 0) -> dict[str, float]:
    """Token-weighted NLL, perplexity and next-token accuracy over the val source."""
    was_training = model.training
    model.eval()
    nll, correct, count = 0.0, 0, 0
    for batch in data.val.eval_batches(batch_size, max_batches):
        args, kw, y = model_inputs(kind, batch, device)
        with autocast_ctx(device, dtype):
            logits, _ = model(*args, **kw)
        logits = logits.float()
        nll += F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX, reduction="sum").item()
        valid = y != IGNORE_INDEX
        correct += ((logits.argmax(-1) == y) & valid).sum().item()
        count += valid.sum().item()
    model.train(was_training)
    loss = nll / max(count, 1)
    return {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "accuracy": correct / max(count, 1), "tokens": count}


def compile_or_eager(raw, data: "Data", kind: str, batch_size: int, device, dtype, verbose: bool):
    """torch.compile(raw), checked on one training step; the eager model where this machine cannot compile
    (no C++ compiler, an unsupported backend): a slower run beats a failed one."""
    compiled = torch.compile(raw)
    probe = data.train.batch(batch_size, torch.Generator().manual_seed(0))  # leaves the data order alone
    args, kw, y = model_inputs(kind, probe, device)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # nor the dropout RNG
            with autocast_ctx(device, dtype):
                _, loss = compiled(*args, targets=y, **kw)
            loss.backward()
        return compiled
    except Exception as e:  # inductor raises many types; all mean "run eagerly"
        if verbose:
            print(f"guitarformer: torch.compile failed here ({type(e).__name__}); training without it", flush=True)
        return raw
    finally:
        raw.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- the loop


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


def train(cfg: Config, run_dir: str | Path | None = None, resume: str | Path | None = None,
          progress: bool = True, resume_overrides: list[str] | None = None,
          stop_at: int | None = None) -> dict[str, Any]:
    """Train cfg.model on cfg.data; returns a summary (run_dir, best/last val loss, steps, seconds).

    With `resume`, the run's own config is used (cfg is ignored) and `resume_overrides` (`section.key=value`)
    may change it, e.g. train.max_steps to train longer. `stop_at` ends the run (with a checkpoint) after
    that many steps while keeping the schedule of train.max_steps: a pre-emptible job's slice.
    """
    state = None
    if resume is not None:
        run_dir = Path(resume)
        ck = run_dir / "ckpt" / "last.pt"
        if not ck.is_file():
            raise GuitarformerError(f"run {run_dir} has no checkpoint to resume (ckpt/last.pt missing)",
                                    "pass a run directory written by `guitarformer train`")
        state = load_checkpoint(ck)
        cfg = apply_overrides(from_dict(state["config"]), resume_overrides or [])

    dist = setup_distributed(cfg.train.device)
    device = resolve_device(cfg.train.device, dist)
    dtype = resolve_dtype(cfg.train.dtype, device)
    if cfg.train.num_threads > 0:
        torch.set_num_threads(cfg.train.num_threads)
    torch.manual_seed(cfg.train.seed + dist.rank)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    dataset = resolve_dataset(cfg, dist, progress)
    data = Data(cfg, dataset)
    V = len(data.tokenizer)
    if cfg.model.vocab_size not in (0, V):
        raise GuitarformerError(f"model.vocab_size={cfg.model.vocab_size} but the dataset's tokenizer has {V} tokens",
                                "leave model.vocab_size at 0 so it is taken from the dataset")
    cfg.model.vocab_size = V
    cfg.data.dataset = str(dataset)

    run_dir = Path(run_dir) if run_dir else new_run_dir()
    ckpt_dir = run_dir / "ckpt"
    if dist.main:
        try:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            save_config(cfg, run_dir / "config.yaml")
            shutil.copyfile(dataset / "tokenizer.json", run_dir / "tokenizer.json")
        except OSError as e:  # a run dir under a file, no permission, a full disk: before any training time is spent
            raise GuitarformerError(f"cannot write the run directory {run_dir}: {e.strerror or e}",
                                    "pass a writable --run-dir (a folder, not a file), or free disk space") from e


    model = build_model(cfg.model).to(device)
    optimizer = model.configure_optimizer(cfg.train.weight_decay, cfg.train.lr, (cfg.train.beta1, cfg.train.beta2),
                                          device.type)
    scaler = torch.amp.GradScaler(device.type, enabled=(dtype == torch.float16))
    gen = torch.Generator().manual_seed(cfg.train.seed * 1000 + dist.rank)  # data order, separate from dropout
    step, best_val, bad_evals = 0, float("inf"), 0
    if state is not None:
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            if state.get("scaler"):
                scaler.load_state_dict(state["scaler"])
            step, best_val, bad_evals = int(state["step"]), float(state["best_val"]), int(state.get("bad_evals", 0))
            rng = state["rng"]
            gen.set_state(rng["data"][dist.rank] if isinstance(rng["data"], list) else rng["data"])
            torch.set_rng_state(rng["torch"])
            if device.type == "cuda" and rng.get("cuda") is not None:
                torch.cuda.set_rng_state(rng["cuda"])
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as e:  # a damaged or foreign checkpoint
            raise GuitarformerError(
                f"checkpoint {run_dir / 'ckpt' / 'last.pt'} does not match its own config or lacks training state "
                f"({type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''})",
                "resume from a checkpoint written by `guitarformer train`, or start a new run") from e

    raw = model
    if cfg.train.compile:
        model = compile_or_eager(raw, data, cfg.model.kind, cfg.train.batch_size, device, dtype, dist.main)
    if dist.world > 1:

        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    writer = None
    if dist.main:

        writer = SummaryWriter(str(run_dir / "tb"), purge_step=step if state is not None else None)
        if state is None:
            writer.add_text("config", "```\n" + (run_dir / "config.yaml").read_text() + "\n```", 0)
    metrics_file = open(run_dir / "metrics.jsonl", "a") if dist.main else None

    def log(kind: str, s: int, **vals):
        if writer is not None:
            for k, v in vals.items():
                writer.add_scalar(f"{kind}/{k}", v, s)
            metrics_file.write(json.dumps({"step": s, "kind": kind, **vals}) + "\n")
            metrics_file.flush()

    def checkpoint(name: str, s: int):
        if not dist.main:
            return
        gens = [gen.get_state()]
        if dist.world > 1:  # every rank's data position, so a resume continues each one
            gathered = [None] * dist.world
            torch.distributed.all_gather_object(gathered, gen.get_state())
            gens = gathered
        save_checkpoint(ckpt_dir / name, {
            "version": CKPT_VERSION,
            "model": unwrap(raw).state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler.is_enabled() else None,
            "step": s, "best_val": best_val, "bad_evals": bad_evals,
            "config": cfg.to_dict(),
            "rng": {"data": gens if dist.world > 1 else gens[0], "torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state() if device.type == "cuda" else None},
        })

    def gather_gens():
        if dist.world > 1 and not dist.main:
            torch.distributed.all_gather_object([None] * dist.world, gen.get_state())

    kind = cfg.model.kind
    t = cfg.train
    B, A = t.batch_size, t.grad_accum
    tokens_per_step = B * A * cfg.model.block_size * dist.world
    flops_tok = raw.flops_per_token()
    peak = peak_flops(device)
    if dist.main:
        n = raw.num_params(non_embedding=False)
        where = f"{device.type}" + (f" x{dist.world}" if dist.world > 1 else "") + f", {str(dtype).replace('torch.', '')}"
        print(f"guitarformer: {kind} {n / 1e6:.2f}M params, vocab {V}, context {cfg.model.block_size}, on {where}; "
              f"data {dataset} ({len(data.train.split):,} train tokens); run {run_dir}"
              + (f"; resumed at step {step}" if state is not None else ""), flush=True)
        if data.val_is_train:
            print("guitarformer: the val split is empty (too few files); validating on training data", flush=True)


    bar = tqdm(total=t.max_steps, initial=step, desc="train", unit="step", disable=not (progress and dist.main),
               dynamic_ncols=True)
    t_start = time.time()
    t_last, tok_since = time.time(), 0
    last_val: dict[str, float] | None = None
    stopped_by: str | None = None
    model.train()

    def run_eval(s: int) -> bool:
        """Evaluate, log, checkpoint; returns True when early stopping says stop."""
        nonlocal best_val, bad_evals, last_val
        last_val = evaluate(raw, data, kind, device, dtype, B, t.eval_iters)  # eager: no recompiles for eval shapes
        log("val", s, loss=last_val["loss"], ppl=last_val["ppl"], accuracy=last_val["accuracy"])
        improved = last_val["loss"] < best_val
        if improved:
            best_val, bad_evals = last_val["loss"], 0
        else:
            bad_evals += 1
        checkpoint("last.pt", s)
        if improved:
            checkpoint("best.pt", s)
        if not dist.main:
            gather_gens()
            if improved:
                gather_gens()
        return t.patience > 0 and bad_evals >= t.patience

    with _Stop() as stop:
        while step < t.max_steps:
            lr = lr_at(step, cfg)
            for g in optimizer.param_groups:
                g["lr"] = lr
            loss_sum = 0.0
            for micro in range(A):
                batch = data.train.batch(B, gen)
                args, kw, y = model_inputs(kind, batch, device)
                sync = nullcontext() if (dist.world == 1 or micro == A - 1) else model.no_sync()
                with sync:
                    with autocast_ctx(device, dtype):
                        _, loss = model(*args, targets=y, **kw)
                    scaler.scale(loss / A).backward()
                loss_sum += loss.detach().float().item() / A
            if not math.isfinite(loss_sum):
                bar.close()
                raise GuitarformerError(
                    f"training loss became {loss_sum} at step {step}; stopped without saving the bad weights "
                    f"(the last good checkpoint is {ckpt_dir / 'last.pt'})",
                    "lower train.lr, raise train.warmup_steps, or use --set train.dtype=float32",
                )
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip if t.grad_clip > 0 else float("inf"))
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            tok_since += tokens_per_step
            bar.update(1)

            if dist.world > 1:
                lt = torch.tensor([loss_sum], device=device)
                torch.distributed.all_reduce(lt)
                loss_sum = lt.item() / dist.world
            if step % t.log_interval == 0 or step == 1:
                dt = max(time.time() - t_last, 1e-9)
                tps = tok_since / dt
                extra = {"mfu": flops_tok * tps / (peak * dist.world)} if peak else {}
                if device.type == "cuda":  # what the run needs of the card, for choosing batch and context
                    extra["peak_mem_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
                log("train", step, loss=loss_sum, lr=lr, grad_norm=float(grad_norm))
                log("perf", step, tokens_per_s=tps, **extra)
                t_last, tok_since = time.time(), 0
                bar.set_postfix(loss=f"{loss_sum:.3f}", val=f"{last_val['loss']:.3f}" if last_val else "-")

            over_time = t.max_minutes > 0 and (time.time() - t_start) / 60.0 >= t.max_minutes
            sliced = stop_at is not None and step >= stop_at
            if dist.world > 1:
                flag = torch.tensor([1.0 if (over_time or stop.signal) else 0.0], device=device)
                torch.distributed.all_reduce(flag)
                over_time = over_time or flag.item() > 0
            if step % t.eval_interval == 0 or step == t.max_steps or over_time or sliced or stop.signal:
                if run_eval(step) and step < t.max_steps:
                    stopped_by = f"early stopping (no val improvement in {t.patience} evaluations)"
                    break
                if writer is not None and t.sample_interval and step % t.sample_interval == 0:
                    log_riff(writer, raw, data.tokenizer, cfg, step, device)
            if stop.signal:
                stopped_by = "signal " + signal.Signals(stop.signal).name
                break
            if over_time:
                stopped_by = f"time limit ({t.max_minutes} min)"
                break
            if sliced:
                stopped_by = f"stop_at={stop_at}"
                break
    bar.close()

    seconds = time.time() - t_start
    summary = {
        "run_dir": str(run_dir), "step": step, "best_val_loss": best_val,
        "val_loss": last_val["loss"] if last_val else None, "seconds": round(seconds, 1),
        "stopped_by": stopped_by, "device": device.type, "world": dist.world,
    }
    if writer is not None:
        if stopped_by is None or not stopped_by.startswith("signal"):
            log_riff(writer, raw, data.tokenizer, cfg, step, device)
        writer.add_hparams(
            {"kind": kind, "n_layer": cfg.model.n_layer, "n_embd": cfg.model.n_embd, "n_head": cfg.model.n_head,
             "block_size": cfg.model.block_size, "lr": t.lr, "batch_size": B * A * dist.world, "pos": cfg.model.pos},
            {"hparam/best_val_loss": best_val, "hparam/steps": step}, run_name="hparams")
        writer.close()
        metrics_file.close()
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        ckpt = ckpt_dir / ("best.pt" if (ckpt_dir / "best.pt").exists() else "last.pt")
        why = f" (stopped by {stopped_by})" if stopped_by else ""
        print(f"guitarformer: {step} steps in {seconds / 60:.1f} min{why}; best val loss {best_val:.4f} nats/token; "
              f"checkpoint {ckpt}\n  next: guitarformer sample --run {run_dir} --out riff.mid", flush=True)
    if dist.world > 1:
        torch.distributed.barrier()
    if stopped_by and stopped_by.startswith("signal"):
        summary["interrupted"] = True
    return summary
