"""Token NLL: the one loop that training's validation, `guitarformer eval` and the benchmarks all measure with."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext

import torch
import torch.nn.functional as F
from torch import nn

from guitarformer import IGNORE_INDEX
from guitarformer.models.kinds import Inputs


def token_stats(logits: torch.Tensor, targets: torch.Tensor) -> tuple[float, int, int]:
    """(summed NLL in nats, correct next-token guesses, counted tokens) of logits (B, T, V) against targets (B, T);
    targets equal to IGNORE_INDEX are left out."""
    logits = logits.float()
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum").item()
    valid = targets != IGNORE_INDEX
    return nll, int(((logits.argmax(-1) == targets) & valid).sum().item()), int(valid.sum().item())


def summarize(nll: float, correct: int, count: int) -> dict[str, float]:
    """Mean NLL per token, perplexity, accuracy and the token count from `token_stats` sums."""
    loss = nll / max(count, 1)
    return {"nll": loss, "ppl": math.exp(min(loss, 50.0)), "accuracy": correct / max(count, 1), "tokens": count}


@torch.no_grad()
def nll(model: nn.Module, batches: Iterable[Inputs], device,
        autocast: Callable[[], AbstractContextManager] = nullcontext) -> dict[str, float]:
    """Token-weighted NLL, perplexity and next-token accuracy of `model` over `batches` (either kind's Inputs,
    from `kind_of(...).inputs` or `.continuation`), in eval mode; the model goes back to the mode it came in.
    `autocast`: the context each forward runs in (runtime.autocast_ctx for a mixed-precision run)."""
    was_training = model.training
    model.eval()
    total, correct, count = 0.0, 0, 0
    try:
        for batch in batches:
            batch = batch.to(device)
            with autocast():
                logits, _ = batch(model, with_loss=False)
            a, b, c = token_stats(logits, batch.targets)
            total, correct, count = total + a, correct + b, count + c
    finally:
        model.train(was_training)
    return summarize(total, correct, count)
