"""Token NLL: the sums that training's validation and `guitarformer eval` both report."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from guitarformer import IGNORE_INDEX


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
