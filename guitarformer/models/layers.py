"""Transformer building blocks shared by the decoder and the encoder-decoder: attention, FFN, positions, KV cache.

Shape legend (used in every shape comment in guitarformer/models/):
    B   batch size
    T   target / decoder length (queries of self-attention; in a cached step, the NEW tokens only)
    S   source / encoder length (keys of cross-attention)
    L   key length of cached self-attention (cache.length + T)
    C   model width (n_embd)
    nh  number of attention heads
    hs  head size (C // nh)
    V   vocabulary size
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.graph import increment_version

from guitarformer.config import ModelConfig
from guitarformer.models.attend import (attention, key_padding_to_attn_mask, lower_right_causal_mask,
                                        shared_prefix_attention)
from guitarformer.models.ops import as_rows, dropout, layer_norm, linear

RopeTables = tuple[Tensor, Tensor]  # (cos, signed sin), each (T, hs): broadcasts over (..., T, hs)


# --------------------------------------------------------------------------- positions


def sinusoidal_table(n_pos: int, dim: int) -> Tensor:
    """Vaswani et al. sin/cos table (n_pos, dim): even columns sin, odd columns cos."""
    pos = torch.arange(n_pos, dtype=torch.float32).unsqueeze(1)  # (n_pos, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(n_pos, dim)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq[: dim // 2])  # dim odd: one fewer cos column
    return table


class RotaryEmbedding(nn.Module):
    """Rotary position tables (RoPE, Su et al.), rotate-half layout as in GPT-NeoX/LLaMA."""

    def __init__(self, head_size: int, max_len: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_size % 2:
            raise ValueError(f"rope needs an even head size, got {head_size}")
        inv_freq = 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.float32) / head_size))
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)  # (max_len, hs/2)
        cos, sin = angles.cos(), angles.sin()
        # Full-width tables, so a rotation is x * cos + swap_halves(x) * sin in four ops instead of ten at every
        # layer of every decoding step; the sine's first half is negated (x1 cos - x2 sin == x1 cos + x2 (-sin)
        # exactly in IEEE arithmetic, so the result is bit for bit the half-split formula's).
        # Non-persistent: derived from the config, so checkpoints stay plain weights.
        self.register_buffer("cos", torch.cat((cos, cos), 1), persistent=False)  # (max_len, hs)
        self.register_buffer("sin", torch.cat((-sin, sin), 1), persistent=False)  # (max_len, hs)

    def forward(self, start: int | Tensor, length: int) -> RopeTables:
        if isinstance(start, Tensor):  # the positions themselves: (T,) (a static cache), or (B, T) (rows padded)
            at = start if start.dim() == 1 else start.unsqueeze(1)  # (T,) or (B, 1, T): broadcast over heads
            return self.cos[at], self.sin[at]
        return self.cos[start : start + length], self.sin[start : start + length]


def apply_rope(x: Tensor, rope: RopeTables) -> Tensor:
    """Rotate (..., T, hs) queries and keys by their position's angles (q and k stacked in one tensor: one pass)."""
    cos, sin = rope
    if cos.dtype != x.dtype:  # autocast/bf16: keep one dtype
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    # roll by hs/2 swaps the halves: (x1, x2) -> (x2, x1); with the signed table this is (x1 cos - x2 sin, x2 cos + x1 sin)
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin


class TokenEmbedding(nn.Module):
    """Token embedding plus absolute positions (learned or sinusoidal; none for rope), then dropout."""

    def __init__(self, wte: nn.Embedding, pos: str, max_len: int, dropout: float) -> None:
        super().__init__()
        self.wte = wte  # may be shared (encoder-decoder) and tied to the LM head
        self.pos = pos
        self.max_len = max_len
        n_embd = wte.embedding_dim
        if pos == "learned":
            self.wpe = nn.Embedding(max_len, n_embd)
        elif pos == "sinusoidal":
            self.register_buffer("table", sinusoidal_table(max_len, n_embd), persistent=False)
        elif pos != "rope":
            raise ValueError(f"unknown positional scheme {pos!r}: use learned, sinusoidal or rope")
        self.dropout = dropout

    def forward(self, idx: Tensor, start: int | Tensor = 0) -> Tensor:
        """idx (B, T) at positions start.. (an int), or at the positions given: (T,) (a static cache) or (B, T)."""
        T = idx.shape[1]
        at: slice | Tensor = start if isinstance(start, Tensor) else slice(start, start + T)
        if isinstance(at, slice) and at.stop > self.max_len:
            raise ValueError(f"position {at.stop - 1} is past the model's context of {self.max_len} tokens")
        x = F.embedding(idx, self.wte.weight)  # (B, T, C)
        if self.pos == "learned":
            x = x + self.wpe.weight[at]  # (T, C): a slice, no index tensor to build, where start is an int
        elif self.pos == "sinusoidal":
            x = x + self.table[at].to(x.dtype)
        return dropout(x, self.dropout, self.training)


# --------------------------------------------------------------------------- KV cache


@dataclass(frozen=True)
class CacheShape:
    """A KV cache's size per row: `n_layer` layers of `n_head` heads of `head_size`, up to `max_len` positions."""

    n_layer: int
    n_head: int
    head_size: int
    max_len: int


class KVCache:
    """Per-layer self-attention keys/values for incremental decoding, plus cross-attention K/V of the memory.

    Self-attention K/V live in one preallocated (B, nh, max_len, hs) buffer per layer; `length` counts
    the positions already written and is advanced by the model once all layers have seen the new tokens.
    With dtype=None the buffers are allocated on first write in the dtype the layer produced, so the
    same cache works in fp32, under bf16 autocast and for a bf16 model.

    `static=True` (for a captured decoding step, CUDA graphs): every shape is fixed whatever the length. The next
    position lives on the device (`pos`, written in place), new keys/values are written there with index_copy_,
    and attention reads the buffer under `mask`, (T, span): the positions written so far. The whole buffer (span =
    max_len) for a captured CUDA graph; a compiled CPU step reads only the slots written so far (`span_of`, the length
    of a tensor, is its graph's one dynamic dimension: attention over a 16-bar riff's few hundred slots, not 1,024).
    A prompt into the empty cache attends to its own keys, as with a dynamic cache (no mask). `length` still counts
    on the host for the caller (a replayed graph runs no Python: the caller advances it, see `advance`).
    The buffers are allocated on first write, so a static cache is filled by an eager step before capture.

    `pads` (B,): rows whose window opens with that many padding tokens (classifier-free guidance reads a prompt and its
    shorter unconditioned twin in one batch, the twin padded in front). A padded row's tokens take the positions they
    would have alone (slot - pads: rope and learned positions see what an unpadded row sees), and no query ever
    attends to a padding key. Padding stays in front when a window slides (it is part of the kept front), so the
    mask is the same for the cache's whole life.

    `prefix` (`KVCache.sharing`): rows whose first `prefix_len` positions are one prompt's, its keys/values kept once,
    (1, nh, P, hs) a layer, and read once a step for every row (attend.shared_prefix_attention); the rows' own
    buffers hold the positions after it. What `generate` makes of B rows of one long prompt (infill's candidates).
    """

    def __init__(
        self,
        shape: CacheShape,
        batch_size: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        static: bool = False,
        pads: Tensor | None = None,
    ) -> None:
        n_layer, max_len = shape.n_layer, shape.max_len
        self.shape, self.batch_size = shape, batch_size
        self.n_layer, self.n_head, self.head_size, self.max_len = n_layer, shape.n_head, shape.head_size, max_len
        self.device = torch.device(device) if device is not None else None
        self.dtype = dtype
        self.length = 0
        self.k: list[Tensor | None] = [None] * n_layer
        self.v: list[Tensor | None] = [None] * n_layer
        self.cross: list[tuple[Tensor, Tensor] | None] = [None] * n_layer  # encoder-decoder only
        self.static = static
        self.pos = torch.zeros((), dtype=torch.long, device=self.device) if static else None  # next position
        self.idx: Tensor | None = None  # static: (T,) positions of this step's tokens
        self.mask: Tensor | None = None  # static: (T, span) keys each new query may see
        # static: a 1-D tensor whose length is how many slots attention reads (`span`; None: all max_len). A compiled
        # CPU step sets it each call, its length a dynamic dimension, so one graph reads only the slots written so far.
        self.span_of: Tensor | None = None
        self.last: Tensor | None = None  # (B, 1) the last token written (a decoder with model.prev_token reads it)
        self.match = None  # a model with model.copy: its MatchState (models/copy.py), made on a window's first call
        self.prefix: list[tuple[Tensor, Tensor]] | None = None  # (k, v) (1, nh, P, hs) a layer, every row's
        self.prefix_len = 0
        self.pads = self.real = None
        if pads is not None:
            self.pads = pads.to(self.device).view(-1, 1)  # (B, 1)
            self.real = torch.arange(max_len, device=self.device) >= self.pads  # (B, max_len): keys that are tokens

    @classmethod
    def stack(cls, parts: list[KVCache], pads: Tensor) -> KVCache:
        """One dynamic cache of the rows of `parts`, in order, each part filled alone and unpadded, its rows then
        padded in front by their `pads` (the same within a part) to end at one position: what a padded batch's prompt
        would leave, without the (B, T, T) mask that prompt needs (a pad's slots hold zeros; no query reads them)."""
        first, B = parts[0], sum(p.batch_size for p in parts)
        out = cls(first.shape, B, first.device, first.dtype, pads=pads)
        shifts, starts = pads.tolist(), [0]
        for p in parts:
            starts.append(starts[-1] + p.batch_size)
        out.length = shifts[0] + first.length
        if any(shifts[a] + p.length != out.length for p, a in zip(parts, starts)):
            raise ValueError("the parts of a stacked cache must end at the same position once padded")
        for layer in range(first.n_layer):
            for name in ("k", "v"):
                buf = getattr(first, name)[layer].new_empty(B, first.n_head, first.max_len, first.head_size)
                for p, a, b in zip(parts, starts, starts[1:]):
                    buf[a:b, :, :shifts[a]] = 0
                    buf[a:b, :, shifts[a]:out.length] = getattr(p, name)[layer][:, :, :p.length]
                getattr(out, name)[layer] = buf
        if first.last is not None:  # model.prev_token
            out.last = torch.cat([p.last for p in parts])
        if first.match is not None:  # model.copy
            out.match = type(first.match).stack([p.match for p in parts], [shifts[a] for a in starts[:-1]],
                                                 out.length)
        return out

    @classmethod
    def sharing(cls, one: KVCache, batch_size: int) -> KVCache:
        """A dynamic cache of `batch_size` rows that all begin with what the one-row cache `one` holds (a decoder's
        prompt, read once): its keys/values become the rows' shared prefix, not copied; what each row writes after
        it is its own."""
        if one.batch_size != 1 or one.static or one.pads is not None or one.prefix is not None or one.length == 0 \
                or any(c is not None for c in one.cross):
            raise ValueError("a shared prefix comes from a filled one-row dynamic cache of a decoder")
        out = cls(one.shape, batch_size, one.device, one.dtype)
        out.length = out.prefix_len = one.length
        out.prefix = [(k[:, :, :one.length], v[:, :, :one.length]) for k, v in zip(one.k, one.v)]
        if one.last is not None:  # model.prev_token
            out.last = one.last.expand(batch_size, -1).clone()
        if one.match is not None:  # model.copy: each row matches its own tokens after the prompt
            out.match = type(one.match).stack([one.match] * batch_size, [0] * batch_size, one.length)
        return out

    def _alloc(self, like: Tensor) -> Tensor:
        shape = (self.batch_size, self.n_head, self.max_len - self.prefix_len, self.head_size)
        return torch.zeros(shape, device=self.device or like.device, dtype=self.dtype or like.dtype)

    def positions(self, T: int) -> int | Tensor:
        """Where this step's T tokens sit: the first position (an int), or for a static cache their positions
        (T,) on the device, with the attention mask for them made here once for every layer; with `pads`, each
        row's own positions (B, T)."""
        if not self.static:
            slots: int | Tensor = self.length
        else:
            assert self.pos is not None
            self.idx = self.pos + torch.arange(T, device=self.pos.device)  # (T,)
            # (T, span); a prompt into the empty cache reads its own keys instead (SelfAttention), so none is made
            self.mask = torch.arange(self.span, device=self.pos.device) <= self.idx[:, None] if self.length else None
            slots = self.idx
        if self.pads is None:
            return slots
        at = slots + torch.arange(T, device=self.pads.device) if isinstance(slots, int) else slots  # (T,)
        return (at - self.pads).clamp(min=0)  # (B, T): a padding token's own position is never read

    @property
    def span(self) -> int:
        """Static: how many slots attention reads (the first `span`; all of them unless a compiled step says)."""
        return self.max_len if self.span_of is None else self.span_of.shape[0]

    def padding_mask(self, T: int, L: int) -> Tensor | None:
        """(B, 1, T, L) the keys this step's T queries may see for being tokens, not padding (None without pads): a
        padding query sees itself too, since a query that sees no key at all would give NaN."""
        if self.real is None:
            return None
        keys = self.real[:, None, None, :L]  # (B, 1, 1, L)
        if T == 1:
            return keys  # a new token: never padding
        own = self.idx if self.static else torch.arange(L - T, L, device=keys.device)  # (T,) the queries' slots
        return keys | (torch.arange(L, device=keys.device) == own[:, None])  # (B, 1, T, L)

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write the new (B, nh, T, hs) k/v at [length, length+T); return all keys/values so far, (B, nh, L, hs)
        (a static cache: its first `span` slots, read under `mask`; with a shared prefix: the rows' own, after it)."""
        T = k.shape[2]
        end = self.length + T
        if end > self.max_len:
            raise ValueError(f"KV cache full: {end} positions > max_len {self.max_len}")
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = self._alloc(k), self._alloc(v)
        ck, cv = self.k[layer], self.v[layer]
        assert ck is not None and cv is not None
        if self.static:
            ck.index_copy_(2, self.idx, k)
            cv.index_copy_(2, self.idx, v)
            return (ck, cv) if self.span_of is None else (ck[:, :, :self.span], cv[:, :, :self.span])
        start, end = self.length - self.prefix_len, end - self.prefix_len  # the rows' own slots (all without a prefix)
        ck[:, :, start:end] = k
        cv[:, :, start:end] = v
        return ck[:, :, :end], cv[:, :, :end]

    def keep_last(self, tokens: Tensor) -> None:
        """Remember the (B, 1) last token written; a static cache writes it into the same buffer (a captured step
        reads and writes it on every replay). Its own strides, not the prompt's: a compiled step's guards check them,
        and a prompt's width in them would make every length of prompt another program (generation/decode/compiled.py)."""
        if self.static and self.last is not None and self.last.shape == tokens.shape:
            self.last.copy_(tokens)
        else:
            self.last = tokens.clone(memory_format=torch.contiguous_format)

    def advance(self, n: int) -> None:
        """n more positions written: the host count, and a static cache's device position (in place, so a
        captured step advances it on every replay; the host count is then the caller's to advance)."""
        self.length += n
        if self.pos is not None:
            self.pos.add_(n)

    def reset(self, keep_memory: bool = False) -> None:
        """Forget everything (buffers are kept and overwritten) so the cache can serve a new prompt;
        `keep_memory` keeps the cross-attention K/V (the same source, a window that slides)."""
        self.length = 0
        if self.pos is not None:
            self.pos.zero_()
        if self.prefix is not None:  # the rows' own buffers were sized for what follows the prefix
            self.prefix, self.prefix_len = None, 0
            self.k, self.v = [None] * self.n_layer, [None] * self.n_layer
        if not keep_memory:
            self.cross = [None] * self.n_layer


# --------------------------------------------------------------------------- attention


class SelfAttention(nn.Module):
    """Multi-head self-attention through SDPA, one fused QKV projection, optional KV cache and rope.

    The same forward serves training, prompts and one-token decoding steps; it is written with few ops
    because at one token per step each op's fixed cost (a few µs on a CPU) is what a step costs.
    """

    def __init__(self, n_embd: int, n_head: int, dropout: float, bias: bool, causal: bool,
                 attn_dropout: float | None = None) -> None:
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head, self.head_size, self.causal, self.dropout = n_head, n_embd // n_head, causal, dropout
        self.attn_dropout = dropout if attn_dropout is None else attn_dropout  # on the attention weights
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)  # rows: [q; k; v], like nn.MultiheadAttention
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)

    def forward(
        self,
        x: Tensor,
        key_mask: Tensor | None = None,
        rope: RopeTables | None = None,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> Tensor:
        B, T, C = x.shape
        # One matmul for q, k and v, then views only: SDPA takes strided inputs, so no contiguous copies.
        qkv = linear(x, self.c_attn).view(B, T, 3, self.n_head, self.head_size)  # (B, T, 3, nh, hs)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, B, nh, T, hs): q, k, v as views
        if rope is None:
            q, k, v = qkv.unbind(0)  # (B, nh, T, hs) each
        else:
            q, k = apply_rope(qkv[:2], rope).unbind(0)  # (B, nh, T, hs) each, rotated in one pass
            v = qkv[2]
        fresh = cache is not None and cache.length == 0  # a prompt into an empty cache (static too: an eager prefill)
        if cache is not None:
            ck, cv = cache.update(layer, k, v)  # (B, nh, L, hs)
            if not fresh:  # a prompt into an empty cache attends to its own k/v: denser than the cache's views
                k, v = ck, cv
            if cache.prefix is not None:  # rows after one prompt: its keys read once for all of them
                y = shared_prefix_attention(q, *cache.prefix[layer], k, v)
                return self._out(y, B, T, C)
        L = k.shape[2]

        mask = key_padding_to_attn_mask(key_mask)  # (B, 1, 1, L) or None
        pads = cache.padding_mask(T, L) if cache is not None else None  # rows padded in front (guidance's twin)
        if pads is not None:
            mask = pads if mask is None else mask & pads  # (B, 1, T, L)
        is_causal = False
        if cache is not None and cache.static and not fresh:  # fixed shapes: the first `span` slots, the written ones
            mask = cache.mask if mask is None else mask & cache.mask  # (T, span) or (B, 1, T, span)
        elif self.causal:
            if T == L and mask is None:
                is_causal = True  # fast path: square, top-left == lower-right
            elif T > 1 or mask is not None:  # one new query may see every cached key: no mask needed
                tri = lower_right_causal_mask(T, L, x.device)  # (T, L)
                mask = tri if mask is None else mask & tri  # (B, 1, T, L)
        y = attention(q, k, v, mask, self.attn_dropout if self.training else 0.0, is_causal)  # (B, nh, T, hs)
        return self._out(y, B, T, C)

    def _out(self, y: Tensor, B: int, T: int, C: int) -> Tensor:
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C); a view when T == 1
        return dropout(linear(y, self.c_proj), self.dropout, self.training)


class CrossAttention(nn.Module):
    """Multi-head attention from decoder queries to encoder memory: Q projection plus one fused KV projection."""

    def __init__(self, n_embd: int, n_head: int, dropout: float, bias: bool, attn_dropout: float | None = None) -> None:
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head, self.head_size, self.dropout = n_head, n_embd // n_head, dropout
        self.attn_dropout = dropout if attn_dropout is None else attn_dropout  # on the attention weights
        self.q_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.kv_proj = nn.Linear(n_embd, 2 * n_embd, bias=bias)  # rows: [k; v]
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)

    def memory_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        B, S, C = memory.shape
        k, v = (
            t.view(B, S, self.n_head, self.head_size).transpose(1, 2)  # (B, nh, S, hs)
            for t in linear(memory, self.kv_proj).split(C, dim=2)  # 2 x (B, S, C)
        )
        return k, v

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        key_mask: Tensor | None = None,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> Tensor:
        B, T, C = x.shape
        q = linear(x, self.q_proj).view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        if cache is not None and cache.cross[layer] is not None:
            k, v = cache.cross[layer]  # memory never changes while decoding: projected once
        else:
            if memory is None:
                raise ValueError("cross-attention needs the encoder memory (or a cache that already holds it)")
            k, v = self.memory_kv(memory)  # (B, nh, S, hs)
            if cache is not None:
                cache.cross[layer] = (k, v)
        y = attention(q, k, v, key_padding_to_attn_mask(key_mask), self.attn_dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return dropout(linear(y, self.c_proj), self.dropout, self.training)


# --------------------------------------------------------------------------- FFN and block


def swiglu_hidden(n_embd: int, ffn_mult: float) -> int:
    """SwiGLU has three matrices, so 2/3 of the GELU width keeps the parameter count; round up to 8."""
    h = int(2 * ffn_mult * n_embd / 3)
    return 8 * math.ceil(h / 8)


def _swiglu(h: Tensor) -> Tensor:
    gate, up = h.chunk(2, dim=-1)  # (..., hidden) each
    return F.silu(gate) * up


class FeedForward(nn.Module):
    """Position-wise MLP: GELU or SwiGLU (gate and up projections fused in one matmul)."""

    def __init__(self, n_embd: int, ffn: str, ffn_mult: float, dropout: float, bias: bool) -> None:
        super().__init__()
        self.swiglu = ffn == "swiglu"
        if ffn not in ("gelu", "swiglu"):
            raise ValueError(f"unknown ffn {ffn!r}: use gelu or swiglu")
        hidden = swiglu_hidden(n_embd, ffn_mult) if self.swiglu else int(ffn_mult * n_embd)
        self.c_fc = nn.Linear(n_embd, 2 * hidden if self.swiglu else hidden, bias=bias)
        self.c_proj = nn.Linear(hidden, n_embd, bias=bias)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        h = linear(x, self.c_fc)  # (B, T, hidden) or (B, T, 2*hidden)
        if self.swiglu:
            h = as_rows(_swiglu, h)  # (B, T, hidden)
        else:
            h = as_rows(F.gelu, h)  # exact erf form: on CPU ~1.5x faster fwd+bwd than the tanh approximation
        return dropout(linear(h, self.c_proj), self.dropout, self.training)


class Block(nn.Module):
    """Pre-norm Transformer block: x + SelfAttn(LN x) [+ CrossAttn(LN x, memory)] + FFN(LN x)."""

    def __init__(self, cfg: ModelConfig, causal: bool, cross: bool) -> None:
        super().__init__()
        C = cfg.n_embd
        self.ln_1 = nn.LayerNorm(C, bias=cfg.bias)
        attn_p = cfg.attn_dropout  # None: cfg.dropout's
        self.attn = SelfAttention(C, cfg.n_head, cfg.dropout, cfg.bias, causal, attn_p)
        self.ln_x = nn.LayerNorm(C, bias=cfg.bias) if cross else None
        self.cross = CrossAttention(C, cfg.n_head, cfg.dropout, cfg.bias, attn_p) if cross else None
        self.ln_2 = nn.LayerNorm(C, bias=cfg.bias)
        self.mlp = FeedForward(C, cfg.ffn, cfg.ffn_mult, cfg.dropout, cfg.bias)

    def forward(
        self,
        x: Tensor,
        key_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        rope: RopeTables | None = None,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> Tensor:
        x = x + self.attn(layer_norm(x, self.ln_1), key_mask, rope, cache, layer)  # (B, T, C)
        if self.cross is not None:
            assert self.ln_x is not None
            x = x + self.cross(layer_norm(x, self.ln_x), memory, memory_mask, cache, layer)
        return x + self.mlp(layer_norm(x, self.ln_2))


# --------------------------------------------------------------------------- init and optimizer


def init_gpt2_(module: nn.Module, n_residual: int) -> None:
    """GPT-2 init: N(0, 0.02) weights, zero biases, and residual output projections (c_proj)
    scaled by 1/sqrt(n_residual) so the residual stream's variance does not grow with depth."""
    for name, m in module.named_modules():
        if isinstance(m, nn.Linear):
            std = 0.02 / math.sqrt(n_residual) if name.endswith("c_proj") else 0.02
            nn.init.normal_(m.weight, mean=0.0, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)


FUSED_ADAMW_DEVICES = ("cpu", "cuda")  # where torch's fused AdamW runs


def make_adamw(
    named_params: Iterable[tuple[str, nn.Parameter]],
    weight_decay: float,
    lr: float,
    betas: tuple[float, float],
    device_type: str,
) -> torch.optim.AdamW:
    """AdamW that decays only matrices (linear and embedding weights), never biases or norm gains."""
    params = [p for _, p in named_params if p.requires_grad]  # named_parameters() already dedups tied weights
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # The fused kernel updates every tensor in one pass: on this project's 2-core CPU 8-12 ms per step for
    # decoder-small's parameters against 32-64 ms for the default per-tensor loop (and on a GPU, one launch).
    fused = device_type in FUSED_ADAMW_DEVICES or None
    opt = torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused)
    if fused:
        # The fused kernel writes the weights without bumping their version counters (the per-tensor loop's
        # in-place ops do): bump them, or `linear`'s transposed copies would keep the weights of before the step.
        opt.register_step_post_hook(lambda *_: increment_version(params))
    return opt


def as_model_config(cfg: ModelConfig | dict) -> ModelConfig:
    """Accept a ModelConfig or a plain dict of its fields (missing ones take ModelConfig's defaults)."""
    if isinstance(cfg, ModelConfig):
        return cfg
    if isinstance(cfg, dict):
        unknown = set(cfg) - set(ModelConfig.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown model config keys: {sorted(unknown)}")
        return ModelConfig(**cfg)
    raise TypeError(f"expected a ModelConfig or dict, got {type(cfg).__name__}")


class LanguageModel(nn.Module):
    """What both model kinds share: `config`, an empty KV cache, and the AdamW set-up."""

    config: ModelConfig
    lm_head: nn.Linear

    def new_cache(
        self,
        batch_size: int,
        max_len: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        static: bool = False,
        pads: Tensor | None = None,
    ) -> KVCache:
        """An empty KV cache for up to max_len (default block_size) decoder positions; an encoder-decoder
        also keeps its memory's cross-attention K/V there once the first cached step has computed them.
        `static`: fixed shapes for a captured decoding step; `pads`: rows padded in front (see KVCache)."""
        cfg = self.config
        return KVCache(
            CacheShape(cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, max_len or cfg.block_size),
            batch_size,
            device=device if device is not None else self.lm_head.weight.device,
            dtype=dtype,
            static=static,
            pads=pads,
        )

    def configure_optimizer(
        self,
        weight_decay: float,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.95),
        device_type: str = "cpu",
    ) -> torch.optim.AdamW:
        return make_adamw(self.named_parameters(), weight_decay, lr, betas, device_type)
