"""Sampling filters: temperature, top-k, top-p, and a constraint's mask, on one step's logits."""

from __future__ import annotations

from typing import Sequence

import torch


def _filter_logits(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    logits = logits / max(temperature, 1e-8)
    if top_k:
        k = min(int(top_k), logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(-1) - probs > top_p  # keep the smallest set whose mass reaches top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                generator: torch.Generator | Sequence[torch.Generator] | None = None,
                allowed: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from last-position logits (B, V); temperature 0 is greedy.

    `generator`: one for the whole batch, or one per row, so that what a row draws never depends on the other
    rows (riff k of a batch is the riff that row k would give alone, whatever the batch size). A generator on
    another device than the logits (a CPU one) draws on its own device, so a seed gives the same tokens everywhere.
    """
    logits = logits.float()
    if allowed is not None:
        logits = logits.masked_fill(~allowed, float("-inf"))
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(_filter_logits(logits, temperature, top_k, top_p), dim=-1)
    if isinstance(generator, (list, tuple)):
        if len(generator) != probs.shape[0]:
            raise ValueError(f"{len(generator)} generators for {probs.shape[0]} rows")
        on = {g.device for g in generator}
        rows = probs.cpu() if on == {torch.device("cpu")} else probs  # one transfer, not one per row
        picked = [torch.multinomial(rows[i:i + 1].to(g.device), 1, generator=g).to(probs.device)
                  for i, g in enumerate(generator)]
        return torch.cat(picked).squeeze(-1)
    if generator is not None and generator.device != probs.device:  # a CPU generator: draw on CPU (reproducible)
        return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
