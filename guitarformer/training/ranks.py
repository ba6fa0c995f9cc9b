"""What every rank of a DDP run must agree on: one rank's result shared, numbers reduced over the ranks.
With one process (world 1) each call returns its input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed

from guitarformer.errors import GuitarformerError
from guitarformer.runtime import Dist


def on_main(dist: Dist, fn: Callable[[], Any]) -> Any:
    """fn() on rank 0 alone; its result, or its GuitarformerError, reaches every rank, so all go on or all stop."""
    result, error = None, None
    if dist.main:
        try:
            result = fn()
        except GuitarformerError as e:
            error = (e.problem, e.fix)
    if dist.world > 1:
        box = [(result, error)]
        torch.distributed.broadcast_object_list(box, src=0)
        result, error = box[0]
    if error is not None:
        raise GuitarformerError(*error)
    return result


def mean_over_ranks(x: float, dist: Dist, device) -> float:
    """x averaged over the ranks."""
    if dist.world == 1:
        return x
    t = torch.tensor([x], device=device)
    torch.distributed.all_reduce(t)
    return t.item() / dist.world


def min_over_ranks(x: int, dist: Dist, device) -> int:
    """The smallest x of any rank."""
    if dist.world == 1:
        return x
    t = torch.tensor([float(x)], device=device)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MIN)
    return int(t.item())


def any_rank(flags: list[bool], dist: Dist, device) -> list[bool]:
    """Each flag, true where it is true on any rank."""
    if dist.world == 1:
        return flags
    t = torch.tensor([1.0 if f else 0.0 for f in flags], device=device)
    torch.distributed.all_reduce(t)
    return [v > 0 for v in t.tolist()]
