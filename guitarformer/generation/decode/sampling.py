"""Sampling filters: temperature, top-k, top-p, and a constraint's mask, on one step's logits; SamplingParams, the
knobs of one call of `generate`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How `generate` samples: the token budget, the filters and when a row stops.

    `top_k` None or 0 and `top_p` None or 1 are off; `temperature` 0 is greedy. `max_bars`: rows end after this many
    bars (with a constraint, its masks hold them to it). On CUDA every step replays a captured CUDA graph
    (generation/decode/captured.py); tokens are the same on every decoding path (engine.py `_Path`). `compile`: on a
    CPU, the one-token step compiled by torch.compile against a static cache (generation/decode/compiled.py) for batches of
    up to 2 rows (a riff, a guided one), where it pays, after seconds of compiling once per batch shape (saved for
    later processes); more rows decode eagerly. On CUDA, the step compiled (inductor's fused kernels) and then captured
    in the CUDA graph (`compiled.HeldStep`), for any batch, after a compile (docs/results/BENCH_SAMPLE.md and
    docs/results/BENCH_GPU.md have the speeds).
    `guidance`: classifier-free guidance for a call given an unconditioned twin prompt (`generate(..., guide=)`):
    each step's logits are c + guidance * (c - u), c the prompt's and u the twin's; 0 is off."""

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    max_bars: int | None = None
    compile: bool = False
    guidance: float = 0.0

    @classmethod
    def from_config(cls, sample_cfg: Any, **asked: Any) -> "SamplingParams":
        """The run's config `sample` section (max_new_tokens, temperature, top_k, top_p), with the values in
        `asked` that are not None in their place."""
        base = cls(max_new_tokens=sample_cfg.max_new_tokens, temperature=sample_cfg.temperature,
                   top_k=sample_cfg.top_k or None, top_p=sample_cfg.top_p)
        chosen = {k: v for k, v in asked.items() if v is not None}
        if "top_k" in chosen:
            chosen["top_k"] = chosen["top_k"] or None  # 0 = off, as in the config
        return replace(base, **chosen)


def _filter_logits(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    if temperature != 1.0:  # x / 1.0 is x: one op fewer a step at the default temperature
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
        logits = torch.where(allowed, logits, float("-inf"))  # masked_fill(~allowed, ...) in one op, not two
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(_filter_logits(logits, temperature, top_k, top_p), dim=-1)
    if isinstance(generator, (list, tuple)):
        if len(generator) != probs.shape[0]:
            raise ValueError(f"{len(generator)} generators for {probs.shape[0]} rows")
        # One uniform number per row from that row's generator, then the inverse of the row's cumulative
        # distribution, batched: a draw per row is all that is done row by row.
        wide = torch.float32 if probs.device.type == "mps" else torch.float64  # MPS has no float64
        home = generator[0].device
        u = torch.stack([torch.rand((), generator=g, dtype=torch.float64, device=g.device).to(home)
                         for g in generator]).to(probs.device, wide)  # (B,) one transfer for the batch
        cdf = probs.to(wide).cumsum(-1)  # (B, V)
        total = cdf[:, -1]
        x = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))  # below the total, always
        # right=True: the first token whose cdf passes x, so a token of probability 0 is never drawn
        return torch.searchsorted(cdf, x.unsqueeze(1), right=True).squeeze(1)
    if generator is not None and generator.device != probs.device:  # a CPU generator: draw on CPU (reproducible)
        return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
