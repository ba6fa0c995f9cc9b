"""Checkpoints: plain dicts of tensors and primitives, written atomically, loaded with weights_only=True."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch

from guitarformer.errors import GuitarformerError

CKPT_VERSION = 1


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module under DDP and torch.compile wrappers (so keys never carry `module.` / `_orig_mod.`)."""
    while True:
        if hasattr(model, "module") and isinstance(model.module, torch.nn.Module):  # DDP
            model = model.module
        elif hasattr(model, "_orig_mod"):  # torch.compile
            model = model._orig_mod
        else:
            return model


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write `state` to path via a temp file + fsync + rename: a crash or a full disk never leaves a torn file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        kept = " (the previous checkpoint there is intact)" if path.exists() else ""
        raise GuitarformerError(
            f"could not write checkpoint {path}: {e.strerror or e}{kept}",
            "free disk space or fix the folder's permissions, then resume with --resume",
        ) from e
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint without ever executing code from it."""
    path = Path(path)
    if not path.is_file():
        raise GuitarformerError(f"checkpoint {path} does not exist", "train first (`guitarformer train`) or pass --checkpoint FILE")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise GuitarformerError(
            f"refusing to load {path}: it holds Python objects other than tensors and plain values, "
            "which could run code when loaded",
            "use checkpoints written by guitarformer, or re-save the weights as a plain state dict",
        ) from e
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise GuitarformerError(
            f"checkpoint {path} is unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
            "use another checkpoint (ckpt/best.pt or ckpt/last.pt) or retrain",
        ) from e
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise GuitarformerError(f"{path} is not a guitarformer checkpoint (no model/config entries)",
                                "pass a ckpt/*.pt file from a guitarformer run directory")
    return state
