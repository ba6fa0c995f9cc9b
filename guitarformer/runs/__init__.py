"""Run directories: a new one per training run, the newest under ./runs, loading one back for sampling; the
checkpoint files inside them are written and read by runs/checkpoint.py."""

from __future__ import annotations

import time
from pathlib import Path

from guitarformer.config import saved_config
from guitarformer.vocab.tab_tokens import tab_layout_of
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.models import build_model
from guitarformer.pretrained import has_pretrained, pretrained_dir
from guitarformer.runs.checkpoint import load_checkpoint


PRETRAINED = "pretrained"  # how `--run`, `train --init` and `prepare --like` name the shipped model


def new_run_dir(base: str | Path = "runs") -> Path:
    """A new, empty folder base/<timestamp> (base/<timestamp>-N when that is taken), created here so that two runs
    started in the same second never share one."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    p, i = Path(base) / stamp, 0
    while True:
        try:
            p.mkdir(parents=True)
            return p
        except FileExistsError:
            i += 1
            p = Path(base) / f"{stamp}-{i}"


def newest_run(base: str | Path = "runs") -> Path:
    """The run under base whose checkpoint was written last (a resumed run counts from its newest checkpoint)."""
    base = Path(base)
    written = {}
    for p in base.glob("*") if base.is_dir() else []:
        times = [c.stat().st_mtime for c in p.glob("ckpt/*.pt")]
        if times:
            written[p] = max(times)
    if not written:
        raise GuitarformerError(f"no trained run under {base}/", "train one with `guitarformer train`, or pass --run DIR / --checkpoint FILE")
    return max(written, key=written.get)


def default_run(base: str | Path = "runs") -> Path:
    """The run a command uses when none is named: the newest under `base`, else the model shipped in the package."""
    try:
        return newest_run(base)
    except GuitarformerError:
        if has_pretrained():
            return pretrained_dir()
        raise


def checkpoint_of(run: str | Path | None = None, checkpoint: str | Path | None = None) -> Path:
    """The checkpoint file a run stands for: `checkpoint` itself, else the run's best (else last) checkpoint; the
    run is `default_run()` when neither is given, and the shipped model when it is named "pretrained" and no such
    folder is here."""
    if checkpoint is not None:
        return Path(checkpoint)
    run_dir = Path(run) if run else default_run()
    if str(run) == PRETRAINED and not run_dir.exists():  # `--run pretrained`, as `--init` and `--like` name it
        return named_checkpoint(PRETRAINED)
    ck = run_dir / "ckpt" / "best.pt"
    if not ck.is_file():
        ck = run_dir / "ckpt" / "last.pt"
    if not ck.is_file():
        raise GuitarformerError(f"run {run_dir} has no checkpoint (ckpt/best.pt or ckpt/last.pt)",
                                "train it first, or pass --checkpoint FILE")
    return ck


def named_checkpoint(name: str | Path) -> Path:
    """The checkpoint a run named on the command line stands for: "pretrained" (the shipped model), a run
    directory (its best, else last checkpoint) or a checkpoint file inside a run directory."""
    if str(name) == PRETRAINED:
        if not has_pretrained():
            raise GuitarformerError("this install has no shipped model (guitarformer/pretrained is incomplete)",
                                    "name a run of your own (a run directory or its ckpt/best.pt)")
        return checkpoint_of(pretrained_dir())
    p = Path(name).expanduser()
    if p.is_dir():
        return checkpoint_of(p)
    if p.is_file():
        return p
    raise GuitarformerError(f"{p} is neither a run directory nor a checkpoint file",
                            f"name a run directory (runs/<timestamp>), its ckpt/best.pt, or {PRETRAINED!r}")


def load_run(run: str | Path | None = None, checkpoint: str | Path | None = None, device: str = "cpu"):
    """(model, tokenizer, cfg) from a run directory (best, else last checkpoint) or a checkpoint file; with neither,
    the newest run under ./runs, else the shipped model."""
    ck = checkpoint_of(run, checkpoint)
    run_dir = ck.parent.parent
    state = load_checkpoint(ck)
    cfg = saved_config(state["config"])
    tok_path = run_dir / "tokenizer.json"
    if not tok_path.is_file():
        raise GuitarformerError(f"no tokenizer.json beside {ck}", "keep checkpoints inside their run directory (ckpt/..)")
    tokenizer = load_tokenizer(tok_path)
    # A run saved before data.tab_layout existed (the shipped model) has none in its config: its tokenizer says.
    cfg.data.tab_layout = tab_layout_of(tokenizer, cfg.data.tab_layout)
    model = build_model(cfg.model)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise GuitarformerError(f"checkpoint {ck} does not match its own config ({str(e).splitlines()[0][:200]})",
                                "use the checkpoint with the run directory (config.yaml) it was trained in") from None
    model.to(device).eval()
    return model, tokenizer, cfg
