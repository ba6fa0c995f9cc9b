"""Training windows from a prepared dataset: decoder (x, y) and encoder-decoder (src, tgt, targets).

When the dataset's tokenizer has control tokens (vocab/controls.py), each training window drops each control type
with probability p, the same types throughout the window, so the model learns every subset of controls, none
included; and a window that starts past its piece's opening controls gets them (those kept) in front, so the
piece's tuning, key and style condition every window of it. Validation windows draw their drops from a generator
seeded by the window's number: the same windows every time; training validates on the plain stream (`PLAIN`:
every control dropped), the tokens a run without controls scores, so their NLL per note compares.

With `infill` > 0 that share of training windows (pairs) becomes a bar-infilling example (vocab/infill.py): a span of
1-4 bars inside one piece, with bars on both sides, laid out for the model kind. Validation never infills, so val
numbers stay comparable with runs trained without it (benchmarks/bench_infill.py measures the fill).

With a shifter (`data.transpose` > 0), each training window or pair is moved by a random shift (data/transpose.py).
On tab layout 3 a shift changes a window's length (Strings come and go with the pitches), so a decoder window is
read with the shifter's slack and cut to T + 1 (padded, the padding not scored, where the split ends first), a
pair's source loses its oldest tokens where it grew, and an infilling example moves its bars before its layout.
The shifter also gets the tokens just before a window and each piece's opening controls, so the moved tokens are
the ones the tokenizer writes for the moved notes even where the window begins inside a note or dropped its tuning.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.vocab.controls import (
    PIECE,
    control_kinds,
    control_names,
)
from guitarformer.vocab.infill import (
    MAX_SPAN_BARS,
    FillIds,
    decoder_example,
    seq2seq_example,
)
from guitarformer.data.prepare import load_meta
from guitarformer.vocab.tab_tokens import CONTROLS_PARAM
from guitarformer.vocab.tokenization import bar_ids, load_tokenizer
from guitarformer.data.transpose import PitchShifter

__all__ = ["ControlDropout", "DecoderWindows", "PairLayout", "PitchShifter", "Seq2SeqPairs", "TokenSplit", "note_ids",
           "PLAIN"]

PLAIN = 1.0  # control dropout of the plain stream: every control type dropped (validation, nats per note)
NOTE_PREFIXES = ("Pitch_", "NoteOn_")  # the one token each note has: Pitch (REMI, TabREMI, TSD, Structured), NoteOn


class TokenSplit:
    """One split's tokens: a flat memory-mapped array plus sequence offsets."""

    def __init__(self, dataset: str | Path, split: str):
        d = Path(dataset)
        meta = load_meta(d)
        self.tokens = np.memmap(d / f"{split}.bin", dtype=np.dtype(meta["dtype"]), mode="r") \
            if meta["tokens"][split] else np.zeros(0, dtype=np.uint16)
        self.offsets = np.load(d / f"{split}.idx.npy")
        self.split = split
        self.dataset = d

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def num_sequences(self) -> int:
        return len(self.offsets) - 1

    def sequence(self, i: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[i]: self.offsets[i + 1]], dtype=np.int64)


class ControlDropout:
    """Control tokens of one split, dropped per window (module docstring): `draw` picks the types to drop,
    `take` reads a window of the stream without them, the piece's kept opening controls in front."""

    def __init__(self, tokenizer, split: TokenSplit, p: float = 0.5, plain: float = 0.0, scored: bool = True):
        if not (0.0 <= p <= 1.0 and 0.0 <= plain <= 1.0):
            raise ValueError(f"control dropout and the plain share must be within 0..1, got {p} and {plain}")
        self.split, self.p, self.plain, self.bos = split, p, plain, tokenizer["BOS_None"]
        kinds = control_kinds(tokenizer.vocab, len(tokenizer))
        names = control_names()
        self.n = len(names)
        self.kind = np.where(kinds < 0, self.n, kinds)  # control_names() index, n for a token that is no control
        self.is_piece = np.isin(kinds, [names.index(c) for c in control_names(PIECE)])
        # Whether the loss scores the control tokens themselves (data.control_targets). The sampler writes every
        # control a riff is asked for (compose/conditioning.py), so the model only has to read them; unscored,
        # the whole loss is on the music, and the model puts next to nothing on a control token anywhere.
        self.scored = scored
        self._unscored = torch.from_numpy(kinds >= 0)
        self._heads: dict[int, tuple[int, np.ndarray]] = {}

    @classmethod
    def of_split(cls, split: TokenSplit, p: float = 0.5, plain: float = 0.0, scored: bool = True
                 ) -> ControlDropout | None:
        """The dropout for a split whose dataset tokenizer has controls (p = 0 drops none, but still puts the
        piece's controls in front; `plain`: the share of windows that drop them all; `scored`: whether control
        tokens are targets of the loss); None for a tokenizer without controls."""
        tok = dataset_tokenizer(split)
        if tok is None or (tok.config.additional_params or {}).get(CONTROLS_PARAM) is None:
            return None
        return cls(tok, split, p, plain, scored)

    def unscore(self, y: torch.Tensor) -> torch.Tensor:
        """`y` (targets, any shape) with every control token made IGNORE_INDEX unless controls are scored."""
        if self.scored:
            return y
        return y.masked_fill((y >= 0) & self._unscored[y.clamp(0, len(self._unscored) - 1)], IGNORE_INDEX)

    def draw(self, gen: torch.Generator) -> np.ndarray:
        """(n + 1,) bool: which control types this window drops (the last entry, for other tokens, is False): each
        with probability p, or all of them in a `plain` share of windows (no extra draw where that share is 0, so
        a run without it draws as before)."""
        drop = (torch.rand(self.n, generator=gen) < self.p).numpy()
        if self.plain > 0 and float(torch.rand(1, generator=gen)) < self.plain:
            drop[:] = True
        return np.append(drop, False)

    def head(self, start: int) -> tuple[int, np.ndarray]:
        """(stream index just past them, ids) of the opening controls of the piece that holds stream index `start`."""
        seq = int(np.searchsorted(self.split.offsets, start, side="right")) - 1
        if seq not in self._heads:
            a, b = int(self.split.offsets[seq]), int(self.split.offsets[seq + 1])
            w = np.asarray(self.split.tokens[a: min(b, a + 1 + len(control_names(PIECE)))], dtype=np.int64)
            j = k = 1 if len(w) and w[0] == self.bos else 0
            while j < len(w) and self.is_piece[w[j]]:
                j += 1
            self._heads[seq] = (a + j, w[k:j])
        return self._heads[seq]

    def heads(self, start: int, stop: int) -> list[np.ndarray]:
        """The opening controls, none dropped, of the piece that holds stream index `start`, then of each piece
        that begins in [start, stop): where the shifter (data/transpose.py) reads each piece's tuning and capo
        when a window dropped them."""
        o = self.split.offsets
        begin = range(int(np.searchsorted(o, start)), min(int(np.searchsorted(o, stop)), len(o) - 1))
        return [self.head(start)[1]] + [self.head(int(o[q]))[1] for q in begin]

    def take(self, start: int, length: int, drop: np.ndarray, stop: int | None = None, front: bool = True
             ) -> tuple[np.ndarray, int, int]:
        """Up to `length` tokens from stream index `start` (to `stop`) without the dropped types, the piece's kept
        opening controls in front when `start` is past them and `front` (at most half the window). Returns
        (tokens, stream index after the last token read, number of tokens put in front)."""
        stop = len(self.split) if stop is None else stop
        end_head, head = self.head(start)
        prefix = head[~drop[self.kind[head]]][: (length - 1) // 2] if front and start >= end_head else head[:0]
        need = length - len(prefix)
        span = max(2 * need, 16)
        while True:
            raw = np.asarray(self.split.tokens[start: min(stop, start + span)], dtype=np.int64)
            keep = ~drop[self.kind[raw]]
            count = np.cumsum(keep)
            if (count.size and count[-1] >= need) or start + span >= stop:
                break
            span *= 2
        cut = int(np.searchsorted(count, need)) + 1 if count.size and count[-1] >= need else len(raw)
        return np.concatenate([prefix, raw[:cut][keep[:cut]]]), start + cut, len(prefix)


class DecoderWindows:
    """Random (x, y) windows of length T from the concatenated token stream of a split.

    With a tokenizer that has controls, each window drops control types with probability `control_dropout`
    (ControlDropout; 0 drops none). A shifter that changes a window's length (tab layout 3, data/transpose.py) gets
    the window read `slack` tokens longer and keeps T + 1 of its moved tokens; where the split ends too soon for
    that, the row is padded and its padded targets skipped. `piece_starts`: the share of windows that open at a
    piece's first token (its BOS), nothing before it, as sampling without a prompt begins (config.py)."""

    def __init__(self, split: TokenSplit, block_size: int, shifter: PitchShifter | None = None,
                 control_dropout: float = 0.5, infill: float = 0.0, control_plain: float = 0.0,
                 control_targets: bool = True, piece_starts: float = 0.0):
        self.split, self.T, self.shifter = split, block_size, shifter
        if len(split) < 2:
            raise ValueError(f"the {split.split} split holds {len(split)} tokens: too few to train on")
        self.piece_starts = piece_starts
        T = min(block_size, len(split) - 1)
        # the pieces a window of T + 1 tokens can open at (the last ones may lie too near the split's end)
        self.piece_offsets = torch.from_numpy(np.asarray(split.offsets[:-1], dtype=np.int64))
        self.piece_offsets = self.piece_offsets[self.piece_offsets < len(split) - T]
        self.controls = ControlDropout.of_split(split, control_dropout, control_plain, control_targets)
        self.infill = infill
        self.fill = _fill_ids(split) if infill > 0 else None

    def batch(self, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(self.split)
        T = min(self.T, n - 1)
        starts = torch.randint(0, n - T, (batch_size,), generator=gen)
        if self.piece_starts > 0 and len(self.piece_offsets):  # (no draws otherwise: older runs' batches unchanged)
            at_piece = torch.rand(batch_size, generator=gen) < self.piece_starts
            piece = self.piece_offsets[torch.randint(0, len(self.piece_offsets), (batch_size,), generator=gen)]
            starts = torch.where(at_piece, piece, starts)
        starts = starts.tolist()
        slack = self.shifter.slack(T + 1) if self.shifter is not None else 0
        rows, skips = [], []
        for i in starts:
            if self.infill and float(torch.rand(1, generator=gen)) < self.infill:
                ex = self._infill_window(i, T + 1, gen)
                if ex is not None:  # else a plain window (a stretch too short for a span with bars around it)
                    w, skip = ex
                    if self.shifter is not None and not self.shifter.resizes:  # else moved before its layout
                        w = self.shifter(w, gen)
                    rows.append(w)
                    skips.append((len(rows) - 1, torch.from_numpy(skip)))
                    continue
            w, front = None, 0
            if self.controls is not None:
                drop = self.controls.draw(gen)
                w, nxt, front = self.controls.take(i, T + 1 + slack, drop)
                while len(w) < T + 1 and i > 0:  # too near the end once controls are dropped: start earlier
                    i = max(0, i - (T + 1 - len(w)))
                    w, nxt, front = self.controls.take(i, T + 1 + slack, drop)
                w = w if len(w) >= T + 1 else None  # a split shorter than a window without its controls
            if w is None:
                w, front = np.asarray(self.split.tokens[i: i + T + 1 + slack], dtype=np.int64), 0
                nxt = i + len(w)
            if self.shifter is not None:
                w = _shift(self, w, i, front, nxt, gen, T + 1)[0]
                if len(w) < T + 1:  # fewer tokens once moved, and the split ends: pad, the padding not scored
                    skips.append((len(rows), torch.from_numpy(np.arange(T) >= len(w) - 1)))
                    w = np.concatenate([w, np.zeros(T + 1 - len(w), dtype=np.int64)])
            rows.append(w)
        a = torch.from_numpy(np.stack(rows))
        x, y = a[:, :-1].contiguous(), a[:, 1:].contiguous()  # (B, T)
        for r, skip in skips:
            y[r, skip] = IGNORE_INDEX
        return x, self._unscore(y)

    def _unscore(self, y: torch.Tensor) -> torch.Tensor:
        return y if self.controls is None else self.controls.unscore(y)

    def _infill_window(self, i: int, length: int, gen: torch.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """An infilling window (vocab/infill.py) from the piece that holds stream index i, moved back where the piece
        ends too soon; with controls, the dropped types left out and the piece's kept opening controls in front."""
        a, b = _piece_bounds(self.split, i, self.fill)
        need = length - 4  # BOS, FillStart, FillEnd and at least one FillBar around the content
        start = max(a, min(i, b - need))
        c = np.asarray(self.split.tokens[start: min(b, start + need)], dtype=np.int64)
        ends_piece = start + need >= b  # the stretch's last bar is whole only where the piece ends there
        front = 0
        if self.controls is not None:
            c, nxt, front = self.controls.take(start, need, self.controls.draw(gen), stop=b)
            ends_piece = nxt >= b
        if self.shifter is not None and self.shifter.resizes:
            # Tab layout 3: the notes move before the layout, which fits the bars in whatever length they now take.
            c = _shift(self, c, start, front, b, gen)[0]
        return decoder_example(self.fill, c, length, gen, whole_end=ends_piece)

    def _control_windows(self, max_windows: int):
        """Consecutive windows with controls: each starts at the last token of the one before (as the windows
        without controls do), drops by a generator seeded with its number, and scores no token twice (the
        controls put in front are inputs only)."""
        n, T, pos, k = len(self.split), self.T, 0, 0
        while pos < n - 1 and (not max_windows or k < max_windows):
            w, nxt, front = self.controls.take(pos, T + 1, self.controls.draw(torch.Generator().manual_seed(k)))
            x = np.zeros(T, dtype=np.int64)
            y = np.full(T, IGNORE_INDEX, dtype=np.int64)
            x[: len(w) - 1] = w[:-1]
            y[: len(w) - 1] = w[1:]
            y[:front] = IGNORE_INDEX
            yield x, y
            pos, k = nxt - 1, k + 1

    def eval_batches(self, batch_size: int, max_batches: int = 0):
        """Consecutive non-overlapping windows covering the split (the last one padded with IGNORE_INDEX)."""
        if self.controls is not None:
            windows = self._control_windows(max_batches * batch_size)
            while True:
                rows = [r for _, r in zip(range(batch_size), windows)]
                if not rows:
                    return
                xs, ys = zip(*rows)
                yield torch.from_numpy(np.stack(xs)), self._unscore(torch.from_numpy(np.stack(ys)))
        n, T = len(self.split), self.T
        starts = list(range(0, max(n - 1, 1), T))
        if max_batches:
            starts = starts[: max_batches * batch_size]
        for b in range(0, len(starts), batch_size):
            xs, ys = [], []
            for s in starts[b: b + batch_size]:
                w = np.asarray(self.split.tokens[s: s + T + 1], dtype=np.int64)
                x = np.zeros(T, dtype=np.int64)
                y = np.full(T, IGNORE_INDEX, dtype=np.int64)
                x[: len(w) - 1] = w[:-1]
                y[: len(w) - 1] = w[1:]
                xs.append(x)
                ys.append(y)
            yield torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


@dataclass(frozen=True)
class PairLayout:
    """How `Seq2SeqPairs` lays a pair out: a source of up to `src_len` tokens ending at one of the `bars` ids, a
    target of up to `tgt_len` tokens after it, fed to the decoder after `bos`, both padded with `pad`."""

    src_len: int
    tgt_len: int
    bars: Sequence[int]
    bos: int
    pad: int

    @classmethod
    def of(cls, tokenizer, src_len: int, tgt_len: int) -> PairLayout:
        """The layout with the tokenizer's Bar ids, BOS and PAD."""
        return cls(src_len, tgt_len, tuple(bar_ids(tokenizer)), tokenizer["BOS_None"], tokenizer.pad_token_id)


class Seq2SeqPairs:
    """(source, target) pairs split at bar lines: source = up to S tokens ending at a bar, target = the bars after
    (`PairLayout`)."""

    def __init__(self, split: TokenSplit, layout: PairLayout, shifter: PitchShifter | None = None,
                 control_dropout: float = 0.5, infill: float = 0.0, control_plain: float = 0.0,
                 control_targets: bool = True):
        self.split, self.S, self.T = split, layout.src_len, layout.tgt_len
        self.bos, self.pad, self.shifter = layout.bos, layout.pad, shifter
        self.controls = ControlDropout.of_split(split, control_dropout, control_plain,
                                                control_targets)  # as DecoderWindows
        self.infill = infill
        self.fill = _fill_ids(split) if infill > 0 else None
        bars = np.isin(np.asarray(split.tokens, dtype=np.int64), np.asarray(layout.bars, dtype=np.int64))
        self.cut_points: list[int] = []  # absolute positions of bar tokens that have a bar before them
        self.seq_start: list[int] = []
        # Each piece's first bar: its source is the BOS alone, which is what sampling without a prompt gives the
        # encoder. Training batches draw these too (so the model learns to begin a piece from an empty source);
        # validation and eval keep to the bar-to-bar pairs above, whose numbers stay comparable.
        self.first_bars: list[tuple[int, int]] = []  # (cut, sequence start)
        for i in range(split.num_sequences):
            a, b = int(split.offsets[i]), int(split.offsets[i + 1])
            pos = np.nonzero(bars[a:b])[0] + a
            if len(pos) and pos[0] > a:
                self.first_bars.append((int(pos[0]), a))
            for p in pos[1:]:
                self.cut_points.append(int(p))
                self.seq_start.append(a)
        if not self.cut_points:
            raise ValueError(f"the {split.split} split has no bar lines to split source from target")
        self.seq_end = {}
        for i in range(split.num_sequences):
            self.seq_end[int(split.offsets[i])] = int(split.offsets[i + 1])

    def _pair(self, k: int, gen: torch.Generator | None) -> tuple[np.ndarray, ...]:
        """Pair k: k < len(cut_points) is a bar-to-bar pair, above that a piece's first bar (training only)."""
        n = len(self.cut_points)
        cut, start = (self.cut_points[k], self.seq_start[k]) if k < n else self.first_bars[k - n]
        end = self.seq_end[start]
        pair = None
        if self.infill and gen is not None and k < n and float(torch.rand(1, generator=gen)) < self.infill:
            pair = self._infill_pair(cut, start, gen)  # None: too near the piece's end for a bar after the span
        if pair is not None:
            src, tgt = pair
            if self.shifter is not None and not self.shifter.resizes:  # else moved before their layout
                both = self.shifter(np.concatenate([src, tgt]), gen)
                src, tgt = both[: len(src)], both[len(src):]
        else:
            if self.controls is None:
                front, src_from = 0, max(start, cut - self.S)
                src = np.asarray(self.split.tokens[src_from: cut], dtype=np.int64)
                tgt = np.asarray(self.split.tokens[cut: min(end, cut + self.T)], dtype=np.int64)
            else:
                src, tgt, front, src_from = self._pair_with_controls(k, cut, start, end, gen)
            if self.shifter is not None and gen is not None:  # the same shift for source and target
                src, tgt = self._shift_pair(src, tgt, front, src_from, end, gen)
                if len(src) > self.S:  # lengthened by the Strings the shift added: its oldest tokens go
                    src = np.concatenate([src[:front], src[len(src) - self.S + front:]])
                tgt = tgt[: self.T]
        s = np.full(self.S, self.pad, dtype=np.int64)
        s[: len(src)] = src
        mask = np.zeros(self.S, dtype=bool)
        mask[: len(src)] = True
        tin = np.full(self.T, self.pad, dtype=np.int64)
        tin[0] = self.bos
        tin[1: len(tgt)] = tgt[:-1] if len(tgt) > 1 else tin[1:1]
        y = np.full(self.T, IGNORE_INDEX, dtype=np.int64)
        y[: len(tgt)] = tgt
        return s, mask, tin, y

    def _pair_with_controls(self, k: int, cut: int, start: int, end: int, gen: torch.Generator | None
                            ) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Source and target of one pair without the control types it drops (validation: drops seeded by k);
        a source that begins past its piece's opening controls gets the kept ones in front. Returns (source,
        target, how many controls the source has in front, the stream index its own tokens start at)."""
        c = self.controls
        drop = c.draw(gen if gen is not None else torch.Generator().manual_seed(k))
        raw = np.asarray(self.split.tokens[max(start, cut - 2 * self.S): cut], dtype=np.int64)
        at = np.nonzero(~drop[c.kind[raw]])[0]  # kept positions in raw
        end_head, head = c.head(start)
        head = head[~drop[c.kind[head]]][: self.S // 2]
        used, front = at[-self.S:], 0
        if at.size and cut - len(raw) + at[-(self.S - len(head)):][0] >= end_head and head.size:
            used, front = at[-(self.S - len(head)):], len(head)
        src = np.concatenate([head[:front], raw[used]])
        tgt, _, _ = c.take(cut, self.T, drop, stop=end, front=False)
        return src, tgt, front, cut - len(raw) + int(used[0]) if used.size else cut

    def _shift_pair(self, src: np.ndarray, tgt: np.ndarray, front: int, src_from: int, stop: int,
                    gen: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Source and target moved by one shift: the source's `front` controls put in front of tokens read from
        stream index `src_from`, the target read after them up to `stop` at most. The lengths may change (tab
        layout 3); a String the shift adds goes with its note."""
        out, at = _shift(self, np.concatenate([src, tgt]), src_from, front, stop, gen)
        k = int(np.searchsorted(at, len(src)))
        return out[:k], out[k:]

    def _infill_pair(self, cut: int, start: int, gen: torch.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """Source with FillBar placeholders for 1-4 bars from `cut`, target those bars + EOS (vocab/infill.py)."""
        a, b = _piece_bounds(self.split, start, self.fill)
        before = np.asarray(self.split.tokens[max(a, cut - 2 * self.S): cut], dtype=np.int64)
        rest_end = cut + 2 * self.S + MAX_SPAN_BARS * self.T
        rest = np.asarray(self.split.tokens[cut: min(b, rest_end)], dtype=np.int64)
        head = None
        if self.controls is not None:
            c = self.controls
            drop = c.draw(gen)
            before, rest = before[~drop[c.kind[before]]], rest[~drop[c.kind[rest]]]
            end_head, head = c.head(start)
            head = head[~drop[c.kind[head]]] if cut - 2 * self.S >= end_head else None
        if self.shifter is not None and self.shifter.resizes:
            # Tab layout 3: the notes move before the layout, which fits the bars in whatever length they now take.
            h = head if head is not None else np.zeros(0, dtype=np.int64)
            moved, rest = self._shift_pair(np.concatenate([h, before]), rest, len(h), max(a, cut - 2 * self.S),
                                           min(b, rest_end), gen)
            head, before = (moved[: len(h)] if head is not None else None), moved[len(h):]
        pair = seq2seq_example(self.fill, before, rest, self.S, gen, head, whole_end=rest_end >= b)
        return None if pair is None else (pair[0], pair[1][: self.T])

    def _stack(self, items) -> tuple[torch.Tensor, ...]:
        cols = [torch.from_numpy(np.stack(c)) for c in zip(*items)]  # src (B,S), src_mask (B,S), tgt (B,T), y (B,T)
        if self.controls is not None:
            cols[-1] = self.controls.unscore(cols[-1])
        return tuple(cols)

    def batch(self, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        ks = torch.randint(0, len(self.cut_points) + len(self.first_bars), (batch_size,), generator=gen).tolist()
        return self._stack([self._pair(k, gen) for k in ks])

    def eval_batches(self, batch_size: int, max_batches: int = 0, stride: int = 8):
        """A fixed, deterministic set of pairs (every `stride`-th cut point)."""
        ks = list(range(0, len(self.cut_points), stride))
        if max_batches:
            ks = ks[: max_batches * batch_size]
        for b in range(0, len(ks), batch_size):
            yield self._stack([self._pair(k, None) for k in ks[b: b + batch_size]])


def _shift(source: DecoderWindows | Seq2SeqPairs, w: np.ndarray, start: int, front: int, stop: int,
           gen: torch.Generator, length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(moved tokens, the index in `w` each comes from) of a window `w` of `source`'s split whose tokens from `front`
    on were read from stream index `start` up to `stop` (before them: controls put in front), moved by its shifter
    with what it needs to write the moved notes as the tokenizer would (data/transpose.py): the tokens before
    `start` of a note the window begins inside, and each piece's opening controls where the window dropped them; at
    most `length` tokens. An added String whose note's Duration lies before the window comes from the window's first
    token."""
    shifter, controls = source.shifter, source.controls
    lead = shifter.lead(source.split.tokens, start)
    heads = controls.heads(start, stop) if controls is not None else None
    out, at = shifter.move(np.concatenate([w[:front], lead, w[front:]]), gen, length,
                           slice(front, front + len(lead)), heads)
    return out, np.where(at >= front + len(lead), at - len(lead), np.minimum(at, front))


def note_ids(tokenizer) -> np.ndarray | None:
    """The ids of the one token every note has (NOTE_PREFIXES), for NLL per note: the unit that compares
    tokenizations. None for a BPE vocabulary, whose tokens hold a varying number of notes."""
    if getattr(tokenizer, "is_trained", False):
        return None
    return np.array(sorted(i for t, i in tokenizer.vocab.items() if t.startswith(NOTE_PREFIXES)), dtype=np.int64)


def dataset_tokenizer(split: TokenSplit):
    """The tokenizer of a split's dataset (None where it has no tokenizer.json), read once per file version: the
    train and val windows, and every evaluation pass, share it. Callers only read it."""
    path = getattr(split, "dataset", None)
    path = path / "tokenizer.json" if path is not None else None
    if path is None or not path.is_file():
        return None
    return _load_tokenizer_cached(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _load_tokenizer_cached(path: str, mtime_ns: int):
    return load_tokenizer(path)


def _fill_ids(split: TokenSplit) -> FillIds:
    """The infilling token ids of a split's dataset (a clear error when its tokenizer has none)."""
    return FillIds.of(dataset_tokenizer(split))


def _piece_bounds(split: TokenSplit, i: int, f: FillIds) -> tuple[int, int]:
    """[a, b): the content of the piece that holds stream index i, without its BOS and EOS."""
    seq = int(np.searchsorted(split.offsets, i, side="right")) - 1
    a, b = int(split.offsets[seq]), int(split.offsets[seq + 1])
    if b > a and int(split.tokens[a]) == f.bos:
        a += 1
    if b > a and int(split.tokens[b - 1]) == f.eos:
        b -= 1
    return a, b
