"""Copying by match (`model.copy`): the token that followed the latest, longest earlier occurrence of what was just
read, mixed into the network's distribution by a learned gate.

Fiddle tunes and riffs play their bars again: 38% of the built-in val stream's tokens sit in a bar that repeats an
earlier bar of its window. The network learns to copy them only in part (the quickstart's run read 0.396
nats/token on tokens whose last 16+ tokens occur earlier in the window, where the token after the latest such
occurrence is right 96.8% of the time; docs/results/TAB_TOKENS.md). So the model states the copy outright:

    p(v) = (1 - g) softmax(z)(v) + g [v == c]

with c the token after the latest position s < t whose last n tokens equal the last n tokens at t, for the
longest n in ORDERS that has such an s (L: that n's index + 1), and g = sigmoid(w . h + b[L]) from the final
hidden state h and a learned bias per length; g = 0 where nothing matches (L = 0). The last n tokens are compared
by a hash (a collision, about one pair in 2^31, makes a wrong copy the gate pays for, the same in training and
decoding). The sampler and the scored NLL see the mixture; the network alone is the softmax(z) inside it. Infilling gains the same way: the bars after the gap sit in
the window before the fill (vocab/infill.py), so a fill that repeats one of them is copied from there.

The forward returns log p as its "logits": cross-entropy, sampling (temperature, top-p, constraint masks) and
every NLL read them unchanged, since softmax(log p) = p.

Shapes: B batch, T new tokens, S cached positions, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# The match lengths looked for, each twice the one before (the n-gram hashes chain so); the longest found sets the
# gate's bias.
ORDERS = (1, 2, 4, 8, 16, 32)
_M, _P = 2_147_483_647, 1_000_003  # n-grams compared by a polynomial hash mod a prime (int64 products stay exact)
_POW = {n: pow(_P, n, _M) for n in ORDERS}
_CHUNK_CELLS = 1 << 22  # MatchState.extend: a chunk's scan of (orders, rows, tokens, positions) at most this many cells


def _grow(h: Tensor, before: Tensor, n: int) -> Tensor:
    """Hash of the 2n-gram ending here from the n-gram's (h) and the one n earlier (before); -1 where either is."""
    return torch.where((h < 0) | (before < 0), torch.full_like(h, -1), (h * _POW[n] + before) % _M)


def _hashes(idx: Tensor, pads: Tensor | None = None) -> list[Tensor]:
    """One (B, T) hash per order in ORDERS of the n tokens ending at each position, -1 where they would start
    before the window, or in a row's padding (`pads` (B, 1): rows padded in front, as KVCache has them)."""
    out = [idx.long() if pads is None else torch.where(torch.arange(idx.shape[1], device=idx.device) >= pads, idx, -1)]
    for n in ORDERS[:-1]:
        h = out[-1]
        before = torch.cat([torch.full_like(h[:, :n], -1), h[:, :-n]], 1)[:, :h.shape[1]]
        out.append(_grow(h, before, n))
    return out


def _latest_equal(h: Tensor) -> Tensor:
    """(B, T) -> (B, T): the latest earlier position with the same hash, -1 where none (or the hash is -1)."""
    order = torch.sort(h, dim=1, stable=True).indices  # equal hashes together, in position order
    hs = h.gather(1, order)
    prev_sorted = torch.where(hs[:, 1:] == hs[:, :-1], order[:, :-1], torch.full_like(order[:, 1:], -1))
    prev = torch.full_like(h, -1).scatter(1, order[:, 1:], prev_sorted)
    return torch.where(h < 0, torch.full_like(prev, -1), prev)


def _pick(latest: list[Tensor], tokens: Tensor, end: int) -> tuple[Tensor, Tensor]:
    """From each order's latest match (B, T), the longest order that has one: its index + 1 (0: none) and the
    token after the match."""
    L = torch.zeros_like(latest[0])
    src = torch.full_like(latest[0], -1)
    for j in reversed(range(len(ORDERS))):
        take = (src < 0) & (latest[j] >= 0)
        L = torch.where(take, j + 1, L)
        src = torch.where(take, latest[j], src)
    c = tokens.gather(1, (src + 1).clamp(0, end - 1))
    return L, torch.where(L > 0, c, torch.zeros_like(c))


@torch.no_grad()
def match_window(idx: Tensor) -> tuple[Tensor, Tensor]:
    """(B, T) tokens of one window -> (L, c), each (B, T): at each position t, the longest n in ORDERS whose n
    tokens ending at t also end at an earlier s < t, as its index + 1 (0: not even the token itself occurred), and
    the token after the latest such s (0 where L = 0)."""
    return _pick([_latest_equal(h) for h in _hashes(idx)], idx, idx.shape[1])


class MatchState:
    """The copy's side of a KV cache: the window's tokens and their n-gram hashes, so each new token costs
    O(len(ORDERS) S) and gives what match_window gives for the whole window. Row-aligned with the cache."""

    def __init__(self, batch_size: int, max_len: int, device) -> None:
        self.tokens = torch.zeros(batch_size, max_len, dtype=torch.long, device=device)
        self.hash = torch.full((len(ORDERS), batch_size, max_len), -1, dtype=torch.long, device=device)
        # Positions + 1 in the narrowest integer that holds them: the per-step scan below reads K * B * S of them.
        small = torch.int16 if max_len < 2**15 else torch.int32
        self._pos1 = torch.arange(1, max_len + 1, dtype=small, device=device)
        self._orders = torch.arange(1, len(ORDERS) + 1, device=device)[:, None]  # (K, 1)
        # (K, 32): row j weighs the last n = ORDERS[j] of 32 tokens, oldest first, by P^0 .. P^(n-1) mod M (the newest
        # token's the highest power, as _grow's chain gives it); zeros before
        self._weights = torch.tensor([[0] * (ORDERS[-1] - n) + [pow(_P, k, _M) for k in range(n)]
                                      for n in ORDERS], device=device)
        self._back = torch.arange(1 - ORDERS[-1], 1, device=device)  # (32,) the last 32 positions, from p
        self._n = torch.tensor(ORDERS, device=device)[:, None] - 1  # (K, 1): an n-gram ending at p starts at p - n + 1

    def fits(self, batch_size: int, max_len: int) -> bool:
        return self.tokens.shape == (batch_size, max_len)

    @torch.no_grad()
    def extend(self, idx: Tensor, start: int, pads: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Write idx (B, T) at positions [start, start + T); (L, c) for each. `pads` (B, 1), at start 0: rows padded
        in front, whose padding is never matched (as stacking the rows' own states gives)."""
        T = idx.shape[1]
        if start == 0:  # a new window: all at once, from the hashes it keeps
            self.tokens[:, :T] = idx
            hashes = _hashes(idx, pads)
            for j, h in enumerate(hashes):
                self.hash[j, :, :T] = h
            return _pick([_latest_equal(h) for h in hashes], idx, T)
        if T == 1:
            return self._step(idx[:, 0], start)
        K, B = self.hash.shape[:2]
        per = max(1, _CHUNK_CELLS // (K * B * (start + T)))  # tokens a pass: the scan's (K, B, T, S) bounded
        parts = [self._chunk(idx[:, a:a + per], start + a) for a in range(0, T, per)]
        return torch.cat([L for L, _ in parts], 1), torch.cat([c for _, c in parts], 1)

    def _chunk(self, idx: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """`_step` for the T tokens idx (B, T) at positions [start, start + T) at once: each position's hashes from
        the 32 tokens ending there (those before position 0 read as token 0, which weighs nothing, as `step_at`
        reads them), each matched against the positions before it alone."""
        K, B = self.hash.shape[:2]
        T = idx.shape[1]
        end, W = start + T, ORDERS[-1]
        self.tokens[:, start:end] = idx
        first = max(0, start + 1 - W)
        window = F.pad(self.tokens[:, first:end], (W - 1 - (start - first), 0)).unfold(1, W, 1)  # (B, T, 32)
        H = (window[:, None] * self._weights[:, None]).sum(-1).remainder_(_M).transpose(0, 1)  # (K, B, T)
        p = torch.arange(start, end, device=idx.device)
        H = torch.where((self._n <= p)[:, None], H, -1)  # the n-gram would start before the window
        self.hash[:, :, start:end] = H
        pos1 = self._pos1[:end]
        same = (self.hash[:, :, None, :end] == H[..., None]) & (pos1 <= p[:, None])  # (K, B, T, end): earlier only
        return self._longest(same, pos1, H)

    def _step(self, x: Tensor, p: int) -> tuple[Tensor, Tensor]:
        """Write the tokens x (B,) at position p; (L, c), each (B, 1). Every order at once, in about fifteen ops: at
        one token per decoding step each op's fixed cost is most of what the step costs (an op per order was several
        times slower at batch 1; at large batches the scan's memory matters)."""
        K, B = self.hash.shape[:2]
        self.tokens[:, p] = x
        first = max(0, p + 1 - ORDERS[-1])
        window = self.tokens[:, first:p + 1]  # (B, W) the last W <= 32 tokens
        # Each order's hash of the n tokens ending at p, as _grow chains it: the sum over i < n of token[p - i] x
        # P^(n-1-i), mod M (int64 exact for any token id below 2^26: a power is below 2^31, 32 terms), in one product
        # and one sum.
        H = (window[:, None, :] * self._weights[:, ORDERS[-1] - window.shape[1]:]).sum(-1).remainder_(_M).t()  # (K, B)
        if p + 1 < ORDERS[-1]:
            H[[n > p + 1 for n in ORDERS]] = -1  # the n-gram would start before the window
        self.hash[:, :, p] = H
        same = self.hash.view(K * B, -1)[:, :p] == H.reshape(-1, 1)  # (K * B, p): earlier positions with the hash
        L, c = self._longest(same, self._pos1[:p], H)
        return L[:, None], c[:, None]

    @torch.no_grad()
    def step_at(self, x: Tensor, p: Tensor, span: int | None = None) -> tuple[Tensor, Tensor]:
        """`_step` with the position on the device (p, a 0-dim tensor) and every shape fixed, for a static KV cache
        (a captured step replays it): the last 32 tokens are read with the ones before the window as token 0, which
        weighs nothing in a hash, and the scan covers the buffer's first `span` slots (all by default; more than p)
        under `position < p` (slots past p may hold an earlier window's). (L, c), each (B, 1), as `_step` gives them."""
        K, B = self.hash.shape[:2]
        self.tokens.index_copy_(1, p.view(1), x.view(B, 1))
        at = p + self._back  # (32,)
        window = self.tokens.index_select(1, at.clamp(min=0)) * (at >= 0)  # (B, 32)
        H = (window[:, None, :] * self._weights).sum(-1).remainder_(_M).t()  # (K, B)
        H = torch.where(self._n <= p, H, -1)  # the n-gram would start before the window
        self.hash.index_copy_(2, p.view(1), H[..., None])
        n = self.hash.shape[2] if span is None else span
        pos1 = self._pos1[:n]
        same = (self.hash.view(K * B, -1)[:, :n] == H.reshape(-1, 1)) & (pos1 <= p)  # (K * B, n)
        L, c = self._longest(same, pos1, H)
        return L[:, None], c[:, None]

    def _longest(self, same: Tensor, pos1: Tensor, H: Tensor) -> tuple[Tensor, Tensor]:
        """(L, c), each shaped as one order's H (K, B[, T]): from `same` (..., S), which positions (numbered + 1 by
        `pos1`) hold each order's hash H, the longest order with a match, as its index + 1 (0: none), and the token
        after its latest match (0 where none)."""
        latest = (same.to(pos1.dtype) * pos1).amax(-1).view(H.shape).long() - 1  # -1: none
        latest = torch.where(H >= 0, latest, -1)  # (K, B[, T]): each order's latest match
        orders = self._orders if H.dim() == 2 else self._orders[:, :, None]
        L = ((latest >= 0) * orders).amax(0)
        src = latest.gather(0, (L - 1).clamp(min=0)[None])[0]
        c = self.tokens.gather(1, (src + 1).view(src.shape[0], -1)).view(src.shape)  # src < p: at most p (-1: slot 0)
        return L, torch.where(L > 0, c, 0)

    @classmethod
    def stack(cls, parts: list[MatchState], shifts: list[int], length: int) -> MatchState:
        """The rows of `parts` in order, each part's shifted right by its shift (KVCache.stack): a shifted row's
        first slots hold token 0 (PAD) and no hash, so nothing ever matches there."""
        B = sum(p.tokens.shape[0] for p in parts)
        out = cls(B, parts[0].tokens.shape[1], parts[0].tokens.device)
        a = 0
        for p, k in zip(parts, shifts):
            b = a + p.tokens.shape[0]
            out.tokens[a:b, k:length] = p.tokens[:, :length - k]
            out.hash[:, a:b, k:length] = p.hash[:, :, :length - k]
            a = b
        return out

    def reorder(self, dst: Tensor, frm: Tensor) -> None:
        self.tokens[dst] = self.tokens[frm]
        self.hash[:, dst] = self.hash[:, frm]


@torch.no_grad()
def match(idx: Tensor, cache=None, src: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(L, c) for idx's positions, matched against everything before them: the window so far (a decoder), or an
    encoder-decoder's source followed by its target so far (`src`, (B, S)), where a fill or a continuation finds
    the bars it repeats. Through a KV cache (its `match`, a MatchState made on the window's first call) each new
    token costs O(S); without one, the window at once."""
    S = 0 if src is None else src.shape[1]
    if cache is None or cache.length == 0:
        seq = idx if src is None else torch.cat([src, idx], 1)
        if cache is None:
            L, c = match_window(seq)
        else:
            B, size = idx.shape[0], S + cache.max_len
            if not (cache.static and cache.match is not None and cache.match.fits(B, size)):
                cache.match = MatchState(B, size, idx.device)  # a static cache's slides refill the same buffers
            L, c = cache.match.extend(seq, 0, cache.pads)  # pads: decoders only (S = 0)
        return L[:, S:], c[:, S:]
    if cache.static and idx.shape[1] == 1:  # a captured step's: the position read on the device
        return cache.match.step_at(idx[:, 0], cache.pos + S, S + cache.span)
    return cache.match.extend(idx, S + cache.length)


class CopyHead(nn.Module):
    """The gate and the mixture: logits (B, T, V), hidden (B, T, C), (L, c) -> log p (B, T, V), in float32."""

    def __init__(self, n_embd: int) -> None:
        super().__init__()
        self.gate = nn.Linear(n_embd, 1)
        self.by_length = nn.Embedding(len(ORDERS) + 1, 1)

    def reset_parameters(self) -> None:
        """Start with the network alone in charge where runs are short, leaning on long matches (g about 0.1 to
        0.5): the gate learns from there."""
        nn.init.zeros_(self.gate.weight)
        nn.init.zeros_(self.gate.bias)
        with torch.no_grad():
            self.by_length.weight.copy_(torch.linspace(-3.0, 0.0, len(ORDERS) + 1)[:, None])

    def forward(self, logits: Tensor, hidden: Tensor, L: Tensor, c: Tensor) -> Tensor:
        logp = F.log_softmax(logits.float(), -1)
        a = self.gate(hidden.float()).squeeze(-1) + self.by_length(L).squeeze(-1)  # (B, T)
        mixed = logp + F.logsigmoid(-a)[..., None]
        hit = torch.logaddexp(mixed.gather(-1, c[..., None]), F.logsigmoid(a)[..., None])
        mixed = mixed.scatter(-1, c[..., None], hit)
        return torch.where((L > 0)[..., None], mixed, logp)
