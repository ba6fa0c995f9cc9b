"""generate(): KV-cached, batched decoding for both model kinds, with a constraint and a bar limit."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from guitarformer.generation.decode.captured import CapturedStep
from guitarformer.generation.decode.compiled import CompiledStep, HeldStep
from guitarformer.generation.constraint.guitar import GuitarConstraint
from guitarformer.generation.decode.sampling import SamplingParams, sample_next
from guitarformer.models.kinds import Prompt, kind_of
from guitarformer.models.layers import KVCache
from guitarformer.runtime import step_work, threads, threads_for


@dataclass(frozen=True)
class StopTokens:
    """The tokens that end a row in `generate`: `eos_id` (None: rows run the whole budget), and the Bar tokens
    `bar_ids` counted against `params.max_bars` (past the limit the next Bar becomes EOS)."""

    eos_id: int | None = None
    bar_ids: Sequence[int] | None = None


@dataclass(frozen=True)
class _Path:
    """How `generate` decodes, where a test or benchmark compares the paths (every one gives the same tokens); never
    a user's choice. `cache` False recomputes the whole window every step (checking the KV cache). `capture` True
    decodes one token at a time against a static KV cache on any device (on CUDA through a captured graph,
    generation/captured.py), False never (nor the CUDA graph around a compiled step), None (auto) on CUDA only: on a
    CPU the static cache alone reads the whole buffer every step, for nothing."""

    cache: bool = True
    capture: bool | None = None


_PATH = _Path()  # the one hook: tests and benchmarks swap it for the length of a call

def _threads_for_steps(fn):
    """Run `fn(model, prompt, ...)` on a CPU with the threads runtime.threads_for gives its steps: one for a small
    model's one-token steps (each op too short to share, and every parallel region waits for its slowest thread:
    with another process busy, 2 threads took 14.4 s against 2.0 s for the same 16-bar riff from the default
    model), unless the command was asked for a count (--threads). The previous count is restored afterwards."""

    @functools.wraps(fn)
    def wrapper(model, prompt, *args, **kwargs):
        if next(model.parameters()).device.type != "cpu":
            return fn(model, prompt, *args, **kwargs)
        shape = (prompt.ids if isinstance(prompt, Prompt) else torch.as_tensor(prompt)).shape
        rows = shape[0] if len(shape) > 1 else 1
        with threads(threads_for(step_work(model, rows))):
            return fn(model, prompt, *args, **kwargs)

    return wrapper


def _on(prompt: Prompt | torch.Tensor | Sequence, device) -> Prompt:
    """The prompt as a Prompt on `device`, its ids (B, T0): plain ids are a decoder's context."""
    if not isinstance(prompt, Prompt):
        prompt = Prompt(torch.as_tensor(prompt, dtype=torch.long))
    ids = prompt.ids if prompt.ids.dim() == 2 else prompt.ids.unsqueeze(0)
    move = lambda t: None if t is None else t.to(device)  # noqa: E731
    return Prompt(move(ids), move(prompt.src), move(prompt.src_key_mask), prompt.keep_front, move(prompt.pads))


def _deciding_device(device: torch.device, constraint, generator) -> torch.device:
    """Where `generate` chooses each token (the constraint's masks, the guards' bias, the draw, the stops): the
    model's device, or the host when the constraint lives there and the model does not. On a GPU the constraint's
    many small tensor ops a token are hundreds of kernel launches, each costing host time, so sampling with it took
    several times as long as without (docs/results/BENCH_GPU.md, benchmarks/gpu_profile_step.py); on the host the same
    ops are cheap and its remembered answers apply (generation/constraint/strings.py). The logits come
    to the host once a step, as a CPU generator's draw needs anyway; the drawn tokens go back to the model's device."""
    home = getattr(constraint, "device", None)
    if home is None or home.type != "cpu" or device.type == "cpu":
        return device
    gens = generator if isinstance(generator, (list, tuple)) else [generator]
    if any(g is not None and g.device.type != "cpu" for g in gens):
        raise ValueError(f"the constraint is on the CPU and the model on {device}: tokens are drawn on the CPU, so "
                         "give CPU generators (or none), or build the constraint on the model's device")
    return home


def in_eval_mode(fn):
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


def _window(ids: torch.Tensor, n: int, length: int, keep_front: int) -> torch.Tensor:
    """The last `length` of ids[:, :n], behind the first `keep_front` (BOS and the piece's controls)."""
    if n <= length or not keep_front:
        return ids[:, max(0, n - length):n]
    return torch.cat([ids[:, :keep_front], ids[:, n - (length - keep_front):n]], 1)


# Rows that all hold one prompt share its cache (KVCache.sharing: its keys read once a step for every row, not once a
# row) where the keys that saves, (rows - 1) x prompt tokens, are at least this many. Below it the shared path's few
# extra ops a layer cost about what they save: 96 tokens from the shipped model on the 2-core CPU, shared against own
# caches, 1.18x the time at 2 rows of 32 tokens, 0.90x (1.06x in another sweep) at 2 of 128, 0.72x at 2 of 512, 1.00x
# at 8 of 4, 0.99x at 8 of 32, 0.42x at 8 of 512, 0.28x at 32 of 512 (benchmarks/bench_shared_prompt.py,
# docs/results/BENCH_SAMPLE.md).
SHARED_KEYS_MIN = 200


class _Reader:
    """Rows the model reads as they are written: the output buffer (the prompt's ids first), the model's window of
    it, its KV cache (eager, or static with a captured step on CUDA or a compiled one on a CPU) and the next-token
    logits. `write` puts the drawn tokens in; `advance` reads them, sliding the window past the context as `generate`
    describes."""

    def __init__(self, model, prompt: Prompt, max_new_tokens: int, use_cache: bool, static: bool = False,
                 compiled: bool = False):
        self.model, self.use_cache, self.static, self.pads = model, use_cache, static, prompt.pads
        # Rows of one prompt may share its cache (KVCache.sharing): a decoder's dynamic cache, unpadded
        self.shares = prompt.src is None and not static and prompt.pads is None
        self.step_fn = kind_of(model).stepper(model, prompt)  # (B, T) new tokens, cache -> logits (B, T, V)
        idx = prompt.ids
        B, T0 = idx.shape
        self.ctx = model.config.block_size
        # (ids, n, length): the model's window of ids[:, :n], behind the prompt's first keep_front tokens
        self.window = functools.partial(_window, keep_front=min(prompt.keep_front, T0, self.ctx // 4))
        self.out = torch.empty(B, T0 + max_new_tokens, dtype=torch.long, device=idx.device)  # no per-step cat
        self.out[:, :T0] = idx
        self.n = T0
        self.held = min(T0, self.ctx)  # tokens in the model's window (the cache's length): both paths slide alike
        self.cache = self.captured = self._logits = None
        if use_cache:
            self.cache = model.new_cache(B, self.ctx, device=idx.device, static=static, pads=self.pads)
            self._logits = self._prefill(self.window(idx, T0, self.ctx))  # eager: allocates a static cache's buffers
            if static and idx.device.type == "cuda":  # compiled: inductor's fused kernels are what is captured
                step = HeldStep(self.step_fn) if compiled else self.step_fn
                self.captured = CapturedStep(step, self.cache, B, idx.device)
            elif static and compiled:
                self.captured = CompiledStep(self.step_fn, self.cache, model)

    def _prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """A window (B, T) into the empty cache: its last position's logits (B, V). Rows that all hold one window
        (infill's candidates, riffs continuing one file) read it once, into a cache they share (`SHARED_KEYS_MIN`).
        Padded rows (guidance's twin) on a dynamic cache are read group by group, unpadded, and their caches stacked:
        a padded prompt would need a (B, T, T) mask and attention without the causal kernel (up to twice the time for
        32 rows of 512 tokens)."""
        B, T = tokens.shape
        if self.shares and (B - 1) * T >= SHARED_KEYS_MIN and bool((tokens == tokens[:1]).all()):
            one = self.model.new_cache(1, self.ctx, device=tokens.device)  # one prompt for every row: read once
            logits = self.step_fn(tokens[:1], one)[:, -1]
            self.cache = KVCache.sharing(one, B)
            return logits.expand(B, -1).clone()
        if self.pads is None or self.static:
            return self._run(tokens)
        shifts = self.pads.tolist()
        cuts = [0, *(r for r in range(1, len(shifts)) if shifts[r] != shifts[r - 1]), len(shifts)]
        parts, logits = [], []
        for a, b in zip(cuts, cuts[1:]):
            parts.append(self.model.new_cache(b - a, self.ctx, device=tokens.device))
            logits.append(self.step_fn(tokens[a:b, shifts[a]:], parts[-1])[:, -1])
        self.cache = KVCache.stack(parts, self.pads)
        return torch.cat(logits)

    def _run(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T) -> last position's logits (B, V)
        cache = self.cache
        if not self.use_cache and self.pads is not None:  # recomputing padded rows: a fresh cache carries the pads
            cache = self.model.new_cache(tokens.shape[0], self.ctx, device=tokens.device, pads=self.pads)
        return self.step_fn(tokens, cache)[:, -1]

    def logits(self) -> torch.Tensor:
        return self._logits if self.use_cache else self._run(self.window(self.out, self.n, self.held))

    def write(self, nxt: torch.Tensor) -> None:
        self.out[:, self.n] = nxt
        self.n += 1

    def advance(self) -> None:
        """Read the tokens written last; a full context slides: the window rebuilt from its last half."""
        slide = self.held >= self.ctx
        self.held = self.ctx // 2 if slide else self.held + 1
        if not self.use_cache:
            return
        last = self.out[:, self.n - 1:self.n]
        if slide:
            if self.static:
                self.cache.reset(keep_memory=True)  # same buffers: a captured step keeps replaying against them
            else:
                self.cache = self.model.new_cache(self.out.shape[0], self.ctx, device=self.out.device, pads=self.pads)
            self._logits = self._prefill(self.window(self.out, self.n, self.ctx // 2))
        elif self.captured is not None:  # the same forward, replayed from its CUDA graph or compiled
            self._logits = self.captured(last, self.cache)[:, -1]
        else:  # the model's own forward, one new token against the cache
            self._logits = self._run(last)


# The most rows (a guided riff's twin counted) a compiled CPU step decodes: from about 4 rows the eager step is as fast
# (the shipped model, a 512-token prompt and 128 new, the constraint on: the compiled step's tokens/s 1.20x the eager
# step's at 2 rows, 1.02x at 4, 0.94x at 8, 0.99x at 32; benchmarks/bench_sample.py --compile), and each batch shape is
# another compile.
COMPILED_ROWS = 2


def _compiled(params: SamplingParams, device: torch.device, rows: int) -> bool:
    """Decode through a compiled step: asked, on a CPU for few rows (more are faster eager), on CUDA inside the
    captured step (any rows; not where capturing is turned off, _PATH)."""
    if not params.compile:
        return False
    if device.type == "cuda":
        return _PATH.capture is not False
    return device.type == "cpu" and rows <= COMPILED_ROWS


def _static_cache(device: torch.device) -> bool:
    """Decode against a static cache (a captured step's): as _PATH asks, else on CUDA."""
    return _PATH.capture if _PATH.capture is not None else device.type == "cuda"


@_threads_for_steps
@in_eval_mode
@torch.inference_mode()  # cheaper than no_grad per op: matters at one token per step
def generate(model, prompt: Prompt | torch.Tensor | Sequence, params: SamplingParams = SamplingParams(), *,
             generator: torch.Generator | Sequence[torch.Generator] | None = None,
             constraint: GuitarConstraint | None = None, stops: StopTokens = StopTokens(),
             guide: Prompt | None = None, logprob: torch.Tensor | None = None) -> torch.Tensor:
    """Continue a prompt by up to params.max_new_tokens; returns (B, T0 + n) ids (the prompt's ids first).

    `prompt`: a models.kinds.Prompt, as the model's kind lays it out (`kind_of(model).prompt(...)`: a decoder
    continues its context; an encoder-decoder's encoder reads `src` and the ids start its target), or plain ids
    (B, T0) a decoder continues. Rows that reach EOS (or finish `params.max_bars` bars) are padded with EOS
    afterwards. Past the context length the window slides: the cache is rebuilt from the last half of the
    context, behind the prompt's first `keep_front` tokens (BOS and the piece's controls: what the whole piece is
    asked to be). With a constraint, `max_bars` is enforced by its masks (any tokenizer); Bar tokens (`bar_ids`)
    past the limit (REMI) become EOS either way (`stops`: StopTokens). `generator`: one for the batch or one per row
    (see `sample_next`). `guide`: the prompt's unconditioned twin (the same rows without what they are asked); with
    `params.guidance` > 0 each step's logits are c + guidance * (c - u) (classifier-free guidance: u read by the
    twin, fed the same tokens, in the same forward: `Prompt.with_twin`). `logprob` (B,) on the deciding device (the
    constraint's): each row's log-probability under the model alone (its logits before guidance, guards, filters and
    mask) of the tokens it holds, up to and including the one that ends it, added in place: what a teacher-forced
    pass over the rows would give, without the pass. The model runs in eval mode and is left in the mode it came in.
    """
    max_new_tokens, max_bars = params.max_new_tokens, params.max_bars
    device = next(model.parameters()).device
    home = _deciding_device(device, constraint, generator)  # where each token is chosen: see _deciding_device
    prompt = _on(prompt, device)
    if constraint is not None:
        # An encoder-decoder's target continues its source in time: the state (time signature, bar count,
        # notes still ringing on their strings) starts from the source (padding tokens change nothing).
        constraint.start(prompt.history().to(home), max_bars)
    B = prompt.ids.shape[0]
    eos_id = stops.eos_id
    ended = _Stops(B, home, eos_id, stops.bar_ids, max_bars)
    sync_every = 1 if home.type == "cpu" else 8  # `done.all()` waits for the GPU: ask now and then
    use_cache = _PATH.cache
    guided = guide is not None and bool(params.guidance)
    if guided:  # rows [B:] are the unconditioned twin of classifier-free guidance, read in the same forward
        prompt = prompt.with_twin(_on(guide, device))
    compiled = use_cache and _compiled(params, device, prompt.ids.shape[0])
    rows = _Reader(model, prompt, max_new_tokens, use_cache,
                   compiled or (use_cache and _static_cache(device)), compiled=compiled)
    last = rows.out[:B, rows.n - 1].to(home)  # each row's last token, where the constraint reads it
    for step in range(max_new_tokens):
        # The mask before the logits: with the constraint on the host and the model on a GPU, the constraint's work
        # (this mask, the update below) runs while the GPU computes the step, not while it waits for the next token.
        allowed = constraint.mask(last, max_new_tokens - step) if constraint is not None else None
        logits = own = rows.logits()
        if guided:
            logits = logits[:B] + params.guidance * (logits[:B] - logits[B:])
        logits = logits.to(home)  # (B, V): on the host, the one transfer of a step (sampling waits for it anyway)
        if hasattr(constraint, "steer"):  # GuitarConstraint's guards (generation/constraint/guards.py): a logit bias
            logits = constraint.steer(logits)
        live = None if logprob is None else ~ended.done  # rows not ended before this token
        last = nxt = ended.apply(sample_next(logits, params.temperature, params.top_k, params.top_p, generator, allowed))
        if logprob is not None:  # the model's own log-probability of the token the row now holds
            drawn = torch.log_softmax(own[:B].float(), -1).gather(1, nxt.to(own.device)[:, None])[:, 0]
            logprob += torch.where(live, drawn.to(logprob), 0)
        rows.write((torch.cat([nxt, nxt]) if guided else nxt).to(device, non_blocking=True))
        finished = step + 1 == max_new_tokens or (
            eos_id is not None and (step + 1) % sync_every == 0 and bool(ended.done.all()))
        if not finished:
            rows.advance()  # the next step launched (a GPU's runs on while the host goes on)
        if constraint is not None:
            constraint.update(nxt)
        if finished:
            break
    out = rows.out[:B, :rows.n]
    if guided and prompt.pads is not None and int(prompt.pads[0]):  # the asked rows were the shorter: unpad them
        out = out[:, int(prompt.pads[0]):]
    return out
