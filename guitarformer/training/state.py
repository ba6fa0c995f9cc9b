"""What a run carries from one step to the next, and what a checkpoint must hold to continue it exactly.

TrainState is the optimizer, the loss scaler, the data-order generator and three counters. A checkpoint is a plain
dict (loadable with torch.load(weights_only=True)) with these keys:

    version, model, optimizer, scaler, step, best_val, bad_evals, config,
    rng: {"data": .., "torch": .., "cuda": ..}

Each `rng` entry is one state (a run of one process) or a list with one state per rank (DDP): every rank draws its
own windows and its own dropout masks, so every rank's streams are saved and each rank resumes its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed

from guitarformer.config import Config
from guitarformer.errors import GuitarformerError
from guitarformer.runtime import Dist
from guitarformer.runs.checkpoint import CKPT_VERSION, unwrap


@dataclass
class TrainState:
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    data_rng: torch.Generator  # window positions and transpositions; dropout draws from torch's global RNG
    step: int = 0
    best_val: float = math.inf
    bad_evals: int = 0  # evaluations since the last improvement (early stopping)
    budget_fitted: bool = False  # train.time_budget_min has fixed max_steps (a resume does not fit it again)

    def record_eval(self, val_loss: float) -> bool:
        """Count one evaluation; True when it is the best so far."""
        if val_loss < self.best_val:
            self.best_val, self.bad_evals = val_loss, 0
            return True
        self.bad_evals += 1
        return False

    def patience_spent(self, patience: int) -> bool:
        return patience > 0 and self.bad_evals >= patience


def new_state(model: torch.nn.Module, cfg: Config, device: torch.device, dtype: torch.dtype, rank: int) -> TrainState:
    """A fresh state: AdamW as the model groups its parameters, a scaler for fp16, the rank's own data order."""
    t = cfg.train
    optimizer = model.configure_optimizer(t.weight_decay, t.lr, (t.beta1, t.beta2), device.type)
    scaler = torch.amp.GradScaler(device.type, enabled=(dtype == torch.float16))
    data_rng = torch.Generator().manual_seed(t.seed * 1000 + rank)  # separate from dropout
    return TrainState(optimizer, scaler, data_rng)


def rng_states(state: TrainState, dist: Dist, device: torch.device) -> dict[str, Any]:
    """Every rank's random streams, for rank 0 to save. Under DDP a collective: every rank must call it."""
    mine = {"data": state.data_rng.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}
    if dist.world == 1:
        return mine
    ranks: list[Any] = [None] * dist.world
    torch.distributed.all_gather_object(ranks, mine)
    return {"data": [r["data"] for r in ranks], "torch": [r["torch"] for r in ranks],
            "cuda": [r["cuda"] for r in ranks] if device.type == "cuda" else None}


def checkpoint_dict(model: torch.nn.Module, state: TrainState, cfg: Config, rng: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint a resume continues from (`rng` from rng_states)."""
    return {
        "version": CKPT_VERSION,
        "model": unwrap(model).state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scaler": state.scaler.state_dict() if state.scaler.is_enabled() else None,
        "step": state.step, "best_val": state.best_val, "bad_evals": state.bad_evals,
        "budget_fitted": state.budget_fitted,
        "config": cfg.to_dict(),
        "rng": rng,
    }


def _rank_entry(saved: Any, rank: int) -> Any:
    """This rank's entry of a saved RNG state: a list holds one per rank; a single state is rank 0's."""
    if isinstance(saved, (list, tuple)):
        return saved[rank] if rank < len(saved) else None
    return saved if rank == 0 else None


def saved_world(ckpt: dict[str, Any]) -> int:
    """How many processes wrote the checkpoint's random streams (1 for a single state)."""
    data = ckpt["rng"]["data"]
    return len(data) if isinstance(data, (list, tuple)) else 1


def restore(model: torch.nn.Module, state: TrainState, ckpt: dict[str, Any], rank: int, device: torch.device,
            where: str) -> None:
    """Load weights, optimizer, scaler, counters and this rank's random streams from `ckpt`.

    A rank the checkpoint has no streams for (a run resumed on more processes than wrote it) keeps its fresh seeds:
    it trains on, just not bit-for-bit as an uninterrupted run would have.
    """
    try:
        model.load_state_dict(ckpt["model"])
        state.optimizer.load_state_dict(ckpt["optimizer"])
        if ckpt.get("scaler"):
            state.scaler.load_state_dict(ckpt["scaler"])
        state.step, state.best_val = int(ckpt["step"]), float(ckpt["best_val"])
        state.bad_evals = int(ckpt.get("bad_evals", 0))
        state.budget_fitted = bool(ckpt.get("budget_fitted", False))
        rng = ckpt["rng"]
        data, cpu = _rank_entry(rng["data"], rank), _rank_entry(rng["torch"], rank)
        if data is not None:
            state.data_rng.set_state(data)
        if cpu is not None:
            torch.set_rng_state(cpu)
        cuda = _rank_entry(rng.get("cuda"), rank)
        if device.type == "cuda" and cuda is not None:
            torch.cuda.set_rng_state(cuda, device)
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as e:  # a damaged or foreign checkpoint
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise GuitarformerError(
            f"checkpoint {where} does not match its own config or lacks training state ({type(e).__name__}: {first})",
            "resume from a checkpoint written by `guitarformer train`, or start a new run") from e
