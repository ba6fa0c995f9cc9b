"""generate(): KV-cached, batched decoding for both model kinds, with a constraint and a bar limit."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from torch import nn

from guitarformer.generation.constraint import GuitarConstraint
from guitarformer.generation.sampling import SamplingParams, sample_next

SMALL_STEP_WORK = 32_000_000  # parameters x rows per decoding step below which one CPU thread is fastest


def _one_thread_for_small_steps(fn):
    """Run `fn(model, prompt_ids, ...)` with one intra-op thread on CPU when a decoding step is small.

    A one-token step of a small model is ~100 ops of a few microseconds each: too little to share between
    threads, and every op that opens a parallel region waits for all of them. When another process keeps a
    core busy that wait dominates (2 threads: 14.4 s vs 2.0 s for the same 16-bar riff from the default model
    with the other core busy). The previous setting is restored afterwards.
    """

    @functools.wraps(fn)
    def wrapper(model, prompt_ids, *args, **kwargs):
        param = next(model.parameters())
        shape = torch.as_tensor(prompt_ids).shape
        rows = shape[0] if len(shape) > 1 else 1
        before = torch.get_num_threads()
        small = param.device.type == "cpu" and before > 1 and \
            sum(p.numel() for p in model.parameters()) * rows <= SMALL_STEP_WORK
        if not small:
            return fn(model, prompt_ids, *args, **kwargs)
        torch.set_num_threads(1)
        try:
            return fn(model, prompt_ids, *args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper


def _in_eval_mode(fn):
    """Run `fn(model, ...)` in eval mode (no dropout) and give the model back in the mode it came in:
    training samples riffs mid-run, and dropout must be back on for the steps after."""

    @functools.wraps(fn)
    def wrapper(model: nn.Module, *args, **kwargs):
        was_training = model.training
        model.eval()
        try:
            return fn(model, *args, **kwargs)
        finally:
            model.train(was_training)

    return wrapper


class _Stops:
    """Which rows are finished: at EOS, or past `max_bars` Bar tokens (the next Bar becomes EOS); a finished row
    gets EOS from then on."""

    def __init__(self, B: int, device, eos_id: int | None, bar_ids: list[int] | None, max_bars: int | None):
        self.eos_id, self.max_bars = eos_id, max_bars
        self.bar_t = torch.tensor(bar_ids or [], dtype=torch.long, device=device)
        self.check_bars = max_bars is not None and self.bar_t.numel() > 0
        self.bars_seen = torch.zeros(B, dtype=torch.long, device=device)
        self.done = torch.zeros(B, dtype=torch.bool, device=device)
        self.eos = torch.full((B,), eos_id if eos_id is not None else 0, dtype=torch.long, device=device)

    def apply(self, nxt: torch.Tensor) -> torch.Tensor:
        """The tokens `nxt` (B,) as the rows' stops allow, and the rows' state updated."""
        if self.check_bars:
            self.bars_seen += torch.isin(nxt, self.bar_t) & ~self.done
            over = self.bars_seen > self.max_bars
            if self.eos_id is not None:
                nxt = torch.where(over, self.eos, nxt)
            self.done |= over
        if self.eos_id is not None:
            nxt = torch.where(self.done, self.eos, nxt)
            self.done |= nxt == self.eos_id
        return nxt


@_one_thread_for_small_steps
@_in_eval_mode
@torch.inference_mode()  # cheaper than no_grad per op: matters at one token per step
def generate(model, prompt_ids, params: SamplingParams = SamplingParams(), *,
             generator: torch.Generator | Sequence[torch.Generator] | None = None,
             constraint: GuitarConstraint | None = None, eos_id: int | None = None, bar_ids: list[int] | None = None,
             src: torch.Tensor | None = None, src_key_mask: torch.Tensor | None = None,
             keep_front: int = 0) -> torch.Tensor:
    """Continue prompt_ids (B, T0) by up to params.max_new_tokens; returns (B, T0 + n) ids.

    Decoder: the prompt is the context. Encoder-decoder: pass `src` (B, S); the prompt starts the target
    (usually [BOS]). Rows that reach EOS (or finish `params.max_bars` bars) are padded with EOS afterwards.
    Past the context length the window slides: the cache is rebuilt from the last half of the context, behind the
    prompt's first `keep_front` tokens (BOS and the piece's controls: what the whole piece is asked to be).
    With a constraint, `max_bars` is enforced by its masks (any tokenizer); Bar tokens (`bar_ids`) past the limit
    (REMI) become EOS either way. `generator`: one for the batch or one per row (see `sample_next`).
    The model runs in eval mode and is left in the mode it came in.
    """
    max_new_tokens, max_bars = params.max_new_tokens, params.max_bars
    temperature, top_k, top_p, use_cache = params.temperature, params.top_k, params.top_p, params.use_cache
    device = next(model.parameters()).device
    idx = torch.as_tensor(prompt_ids, dtype=torch.long, device=device)
    if idx.dim() == 1:
        idx = idx.unsqueeze(0)
    B, T0 = idx.shape
    ctx = model.config.block_size
    keep_front = min(keep_front, T0, ctx // 4)

    def window(ids: torch.Tensor, n: int, length: int) -> torch.Tensor:  # the last `length` of ids[:, :n], front kept
        if n <= length or not keep_front:
            return ids[:, max(0, n - length):n]
        return torch.cat([ids[:, :keep_front], ids[:, n - (length - keep_front):n]], 1)

    is_encdec = src is not None
    memory = None
    if is_encdec:
        src = torch.as_tensor(src, dtype=torch.long, device=device)
        memory = model.encode(src, src_key_mask)
    if constraint is not None:
        # An encoder-decoder's target continues its source in time: the state (time signature, bar count,
        # notes still ringing on their strings) starts from the source (padding tokens change nothing).
        constraint.start(torch.cat([src, idx], 1) if is_encdec else idx, max_bars)
    # One buffer for the whole output: no per-step concatenation.
    out = torch.empty(B, T0 + max_new_tokens, dtype=torch.long, device=device)
    out[:, :T0] = idx
    stops = _Stops(B, device, eos_id, bar_ids, max_bars)
    sync_every = 1 if device.type == "cpu" else 8  # `done.all()` waits for the GPU: ask now and then

    def run(tokens: torch.Tensor, cache):  # (B, T) -> last position's logits (B, V)
        if is_encdec:
            return model.decode(tokens, memory, src_key_mask, cache=cache)[:, -1]
        return model(tokens, cache=cache)[0][:, -1]

    cache = None
    if use_cache:
        cache = model.new_cache(B, ctx, device=device)
        logits = run(window(idx, T0, ctx), cache)
    n = T0
    for step in range(max_new_tokens):
        if not use_cache:
            logits = run(window(out, n, ctx), None)
        allowed = constraint.mask(out[:, n - 1], max_new_tokens - step) if constraint is not None else None
        nxt = sample_next(logits, temperature, top_k, top_p, generator, allowed)
        nxt = stops.apply(nxt)
        out[:, n] = nxt
        n += 1
        if constraint is not None:
            constraint.update(nxt)
        if eos_id is not None and (step + 1) % sync_every == 0 and bool(stops.done.all()):
            break
        if step + 1 == max_new_tokens:
            break
        if use_cache:
            if cache.length >= ctx:  # context full: slide, rebuild the cache from the last half
                cache = model.new_cache(B, ctx, device=device)
                logits = run(window(out, n, ctx // 2), cache)
            else:  # the model's own forward, one new token against the cache
                logits = run(out[:, n - 1:n], cache)
    return out[:, :n]
