"""Checkpoints: plain dicts of tensors and primitives, written atomically, loaded with weights_only=True."""

from __future__ import annotations

import hashlib
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from guitarformer.errors import GuitarformerError

CKPT_VERSION = 1
CHECKSUM_KEY = "checksum"  # sha256 over every tensor's name, dtype, shape and bytes, written by save_checkpoint


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
    """Write `state` to path via a temp file + fsync + rename: a crash or a full disk never leaves a torn file.

    A failed write (full disk, no permission, a path under a file) raises GuitarformerError saying whether
    the previous checkpoint at `path` is intact; the temp file is removed. Temp files left by a writer that
    was killed (SIGKILL, power loss) are removed by the next save to the same path.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    state = {**state, CHECKSUM_KEY: tensor_checksum(state)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(path)
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch.save turns a failed write (ENOSPC) into RuntimeError
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {_first_line(e)}"
        kept = ("; the previous checkpoint there is intact" if _loads(path)
                else "; no earlier checkpoint exists there")
        raise GuitarformerError(
            f"could not write checkpoint {path}: {why}{kept}",
            "free disk space or fix the folder's permissions, then continue with `guitarformer train --resume RUN_DIR`",
        ) from e
    except BaseException:  # a bug (unpicklable state) or Ctrl-C: never leave the temp file behind
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _tensors(obj: Any, name: str = ""):
    """(name, tensor) for every tensor in nested dicts / lists / tuples, in a fixed order."""
    if isinstance(obj, torch.Tensor):
        yield name, obj
    elif isinstance(obj, dict):
        for k in sorted(obj, key=repr):
            if not (name == "" and k == CHECKSUM_KEY):
                yield from _tensors(obj[k], f"{name}/{k!r}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{name}/{i}")


def tensor_checksum(state: dict[str, Any]) -> str:
    """sha256 over the name, dtype, shape and bytes of every tensor in `state` (PyTorch's loader does not check its
    records' CRCs, so a flipped bit inside a weight would otherwise load silently)."""
    h = hashlib.sha256()
    for name, t in _tensors(state):
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)};".encode())
        t = t.detach().cpu().contiguous().reshape(-1)
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0][:200] if str(e).strip() else ""


def _loads(path: Path) -> bool:
    """Whether a checkpoint file exists at path and is a whole zip (every record's CRC checks out)."""

    try:
        with zipfile.ZipFile(path) as z:
            return z.testzip() is None
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False


def _remove_stale_temps(path: Path) -> None:
    """Remove `.NAME.tmp-PID` files of writers that no longer run (killed mid-save)."""
    for t in path.parent.glob(f".{path.name}.tmp-*"):
        try:
            pid = int(t.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # that writer is alive (another process on this path): leave its file alone
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # alive, another user's
        t.unlink(missing_ok=True)


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
    except Exception as e:  # truncated or garbled files raise anything from KeyError to UnicodeDecodeError
        raise GuitarformerError(
            f"checkpoint {path} is unreadable or damaged ({type(e).__name__}: {_first_line(e)})",
            "use another checkpoint (ckpt/best.pt or ckpt/last.pt) or retrain",
        ) from e
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise GuitarformerError(f"{path} is not a guitarformer checkpoint (no model/config entries)",
                                "pass a ckpt/*.pt file from a guitarformer run directory")
    model, cfg = state["model"], state["config"]
    if not (isinstance(model, dict) and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items())
            and isinstance(cfg, dict)):
        raise GuitarformerError(f"{path} is not a guitarformer checkpoint (model is not a dict of named tensors "
                                "or config is not a dict)", "pass a ckpt/*.pt file from a guitarformer run directory")
    if CHECKSUM_KEY in state:  # checkpoints written before the checksum existed load as they are
        if state.pop(CHECKSUM_KEY) != tensor_checksum(state):
            raise GuitarformerError(
                f"checkpoint {path} is damaged: its weights do not match the checksum written with them "
                "(a changed bit on disk or in a copy)",
                "use another checkpoint (ckpt/best.pt or ckpt/last.pt), copy it again, or retrain",
            )
    state["model"] = dequantize(state["model"])  # a shipped model stored as int8 (`quantize_int8`)
    return state


INT8_SCALE = "::int8_scale"  # beside an int8 weight: its rows' scales (`quantize_int8`)


def quantize_int8(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Weights to ship at a quarter of their float32 size: each matrix (2-D or more) as int8 with one float16 scale
    per row (its largest magnitude over 127), the rest as float16. `load_checkpoint` gives float32 back."""
    out: dict[str, torch.Tensor] = {}
    for name, w in weights.items():
        if not w.is_floating_point():
            out[name] = w
        elif w.dim() < 2:
            out[name] = w.to(torch.float16).contiguous()
        else:
            rows = w.float().reshape(w.shape[0], -1)
            scale = (rows.abs().amax(1) / 127).clamp_min(1e-12)
            out[name] = torch.round(rows / scale[:, None]).clamp(-127, 127).to(torch.int8).reshape(w.shape)
            out[name + INT8_SCALE] = scale.to(torch.float16)
    return out


def dequantize(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`quantize_int8`'s weights as float32 (other weights as they are)."""
    if not any(k.endswith(INT8_SCALE) for k in weights):
        return weights
    out = {}
    for name, w in weights.items():
        if name.endswith(INT8_SCALE):
            continue
        scale = weights.get(name + INT8_SCALE)
        if scale is not None:
            out[name] = (w.float().reshape(w.shape[0], -1) * scale.float()[:, None]).reshape(w.shape)
        else:
            out[name] = w.float() if w.is_floating_point() else w
    return out


def checkpoint_facts(path: Path) -> tuple[int | None, float | None]:
    """(step, best validation loss) recorded in a checkpoint; memory-mapped, so its weights are not read again."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # the caller's load has read it already; the facts are only for the summary
        return None, None
    step = state.get("step")
    best = state.get("best_val")
    finite = isinstance(best, (int, float)) and best == best and best != float("inf")
    return (int(step) if isinstance(step, int) else None), (float(best) if finite else None)
