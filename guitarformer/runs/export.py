"""Writing a trained run as the shipped model: its best weights, small enough to ship, with config, tokenizer and card."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from guitarformer.config import save_config
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.pretrained import MAX_BYTES, pretrained_dir
from guitarformer.runs.checkpoint import INT8_SCALE, load_checkpoint, quantize_int8, save_checkpoint
from guitarformer.runs.migrate import read_saved
from guitarformer.runs.rundir import RunDir

FP16_MAX = 65504.0  # the largest finite float16: weights beyond it are stored as bfloat16 instead
# Room left beside the weights for config.yaml, tokenizer.json and the card (a TabREMI tokenizer.json with controls
# is about 20 KB; the card a few KB).
OTHER_FILES_BYTES = 256 * 1024


@dataclass(frozen=True)
class Exported:
    """What `export_run` wrote: the folder, the weights' dtype, parameter count and bytes on disk (all files)."""

    folder: Path
    dtype: str
    parameters: int
    bytes: int


def shipping_dtype(weights: dict[str, torch.Tensor], budget: int) -> torch.dtype:
    """float32 where the weights fit `budget` bytes so, else float16 (more mantissa than bfloat16 for weights of
    ordinary size), else bfloat16 where a weight is beyond float16's range; GuitarformerError where even half
    precision does not fit."""
    n = sum(t.numel() for t in weights.values() if t.is_floating_point())
    if 4 * n <= budget:
        return torch.float32
    if 2 * n > budget:
        raise GuitarformerError(f"a model of {n:,} parameters is {2 * n / 2**20:.1f} MiB even in half precision, "
                                f"more than the {budget / 2**20:.1f} MiB a shipped model may take",
                                "release a smaller model (fewer layers or a narrower width)")
    big = max((float(t.abs().max()) for t in weights.values() if t.is_floating_point() and t.numel()), default=0.0)
    return torch.float16 if big < FP16_MAX else torch.bfloat16


def export_run(run: Path, card: str, out: Path | None = None, form: str | None = None,
               time_signature: str | None = None, int8: bool = False) -> Exported:
    """Write `run`'s best weights (no optimizer state), its config (dataset: the built-in corpus it was trained on),
    its tokenizer and the model card `card` into `out` (default: the package's pretrained folder), laid out as a
    run directory; the weights load with ``torch.load(weights_only=True)``. `form`: its sample.form (the default
    `--form`), and `time_signature` its sample.time_signature (the default `--time-signature`), where the release
    chose them. `int8`: the weights as int8 with a scale per row (`quantize_int8`), for a second model beside the
    first within the package's budget."""
    src, dst = RunDir(run), RunDir(out if out is not None else pretrained_dir())
    state = load_checkpoint(src.best_checkpoint())
    weights = state["model"]
    dtype = "int8" if int8 else shipping_dtype(weights, MAX_BYTES - OTHER_FILES_BYTES)
    weights = quantize_int8(weights) if int8 else \
        {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in weights.items()}
    cfg, run_state = read_saved(state["config"], src, load_tokenizer(src.tokenizer_path))
    cfg.data.dataset = None
    if cfg.train.init and Path(cfg.train.init).parts[-2:] == ("guitarformer", "pretrained"):
        cfg.train.init = "pretrained"  # fine-tuned from the shipped model: its name, not the release machine's path  # trained on the built-in corpus; the release machine's path means nothing elsewhere
    if form is not None:
        cfg.sample.form = form
    if time_signature is not None:  # "none": the model's own meter, which the config says as no setting
        cfg.sample.time_signature = None if time_signature == "none" else time_signature
    dst.ckpt_dir.mkdir(parents=True, exist_ok=True)
    save_checkpoint(dst.checkpoint("best"), {"model": weights, "config": cfg.to_dict(), "step": state.get("step", 0)})
    save_config(cfg, dst.config_path)
    dst.write_state(run_state)  # this version's format: its config says every setting
    shutil.copyfile(src.tokenizer_path, dst.tokenizer_path)
    if src.seen_path.is_file():  # the control values its training data held: what `sample` may ask of it
        shutil.copyfile(src.seen_path, dst.seen_path)
    if src.forms_path.is_file():  # the forms of its training tunes: what `sample --form auto` draws
        shutil.copyfile(src.forms_path, dst.forms_path)
    dst.card_path.write_text(card)
    out = dst.path
    size = sum(f.stat().st_size for f in [*dst.shipped_files(), dst.state_path])
    if size > MAX_BYTES:
        raise GuitarformerError(f"the exported model takes {size / 2**20:.2f} MiB, more than {MAX_BYTES / 2**20:.0f} MiB",
                                "release a smaller model")
    params = sum(t.numel() for k, t in weights.items() if not k.endswith(INT8_SCALE))
    return Exported(out, str(dtype).removeprefix("torch."), params, size)

