"""Training windows from a prepared dataset: decoder (x, y) and encoder-decoder (src, tgt, targets)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.data.prepare import load_meta
from guitarformer.music.guitar import MAX_FRET, STANDARD_TUNING

GUITAR_LOW, GUITAR_HIGH = 40, 88  # E2 .. E6: transposition keeps every note on a standard-tuned 24-fret neck


class TokenSplit:
    """One split's tokens: a flat memory-mapped array plus sequence offsets."""

    def __init__(self, dataset: str | Path, split: str):
        d = Path(dataset)
        meta = load_meta(d)
        self.tokens = np.memmap(d / f"{split}.bin", dtype=np.dtype(meta["dtype"]), mode="r") \
            if meta["tokens"][split] else np.zeros(0, dtype=np.uint16)
        self.offsets = np.load(d / f"{split}.idx.npy")
        self.split = split

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def num_sequences(self) -> int:
        return len(self.offsets) - 1

    def sequence(self, i: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[i]: self.offsets[i + 1]], dtype=np.int64)


class PitchShifter:
    """Transposes token ids by semitones, guitar-aware: a shift is only used if every pitch stays in range."""

    def __init__(self, tokenizer, max_shift: int):
        self.max_shift = max_shift
        V = len(tokenizer)
        self.pitch_of = np.full(V, -1, dtype=np.int64)
        self.open_of = np.full(V, -1, dtype=np.int64)  # tab tokens: String_s -> its open pitch in standard tuning
        self.id_of: dict[int, int] = {}
        for tok_str, i in tokenizer.vocab.items():
            if tok_str.startswith("Pitch_"):
                p = int(tok_str.split("_")[1])
                self.pitch_of[i] = p
                self.id_of[p] = i
            elif tok_str.startswith("String_") and int(tok_str.split("_")[1]) <= len(STANDARD_TUNING):
                self.open_of[i] = STANDARD_TUNING[-int(tok_str.split("_")[1])]
        self.tables: dict[int, np.ndarray] = {}
        for s in range(-max_shift, max_shift + 1):
            t = np.arange(V, dtype=np.int64)
            for p, i in self.id_of.items():
                t[i] = self.id_of.get(p + s, i)
            self.tables[s] = t

    def __call__(self, window: np.ndarray, gen: torch.Generator) -> np.ndarray:
        if self.max_shift <= 0:
            return window
        pitches = self.pitch_of[window]
        pitches = pitches[pitches >= 0]
        if pitches.size == 0:
            return window
        lo = max(-self.max_shift, GUITAR_LOW - int(pitches.min()))
        hi = min(self.max_shift, GUITAR_HIGH - int(pitches.max()))
        lo, hi = self._keep_frets(window, lo, hi)
        if lo > hi:
            return window
        s = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        return self.tables[s][window]


    def _keep_frets(self, window: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
        """Tab tokens: a guitarist transposes a line by moving the hand, so each note keeps its string and its
        fret moves by the shift. Narrow [lo, hi] so no fret (as standard tuning reads it: the tokens do not carry
        the tuning) leaves the neck, or goes further off it than it already was in another tuning."""
        j = np.nonzero(self.open_of[window[3:]] >= 0)[0] + 3  # String tokens; their note's Pitch is 3 before
        if j.size == 0:
            return lo, hi
        pitch = self.pitch_of[window[j - 3]]
        ok = pitch >= 0
        if not ok.any():
            return lo, hi
        frets = pitch[ok] - self.open_of[window[j[ok]]]
        fmin, fmax = int(frets.min()), int(frets.max())
        return max(lo, min(0, -fmin)), min(hi, max(MAX_FRET, fmax) - fmax)


class DecoderWindows:
    """Random (x, y) windows of length T from the concatenated token stream of a split."""

    def __init__(self, split: TokenSplit, block_size: int, shifter: PitchShifter | None = None):
        self.split, self.T, self.shifter = split, block_size, shifter
        if len(split) < 2:
            raise ValueError(f"the {split.split} split holds {len(split)} tokens: too few to train on")

    def batch(self, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(self.split)
        T = min(self.T, n - 1)
        starts = torch.randint(0, n - T, (batch_size,), generator=gen).tolist()
        rows = []
        for i in starts:
            w = np.asarray(self.split.tokens[i: i + T + 1], dtype=np.int64)
            if self.shifter is not None:
                w = self.shifter(w, gen)
            rows.append(w)
        a = torch.from_numpy(np.stack(rows))
        return a[:, :-1].contiguous(), a[:, 1:].contiguous()  # x, y: (B, T)

    def eval_batches(self, batch_size: int, max_batches: int = 0):
        """Consecutive non-overlapping windows covering the split (the last one padded with IGNORE_INDEX)."""
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


class Seq2SeqPairs:
    """(source, target) pairs split at bar lines: source = up to S tokens ending at a bar, target = the bars after."""

    def __init__(self, split: TokenSplit, src_len: int, tgt_len: int, bar_ids: list[int], bos_id: int, pad_id: int,
                 shifter: PitchShifter | None = None):
        self.split, self.S, self.T = split, src_len, tgt_len
        self.bos, self.pad, self.shifter = bos_id, pad_id, shifter
        bars = np.isin(np.asarray(split.tokens, dtype=np.int64), np.asarray(bar_ids, dtype=np.int64))
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
        src = np.asarray(self.split.tokens[max(start, cut - self.S): cut], dtype=np.int64)
        tgt = np.asarray(self.split.tokens[cut: min(end, cut + self.T)], dtype=np.int64)
        if self.shifter is not None and gen is not None:  # the same shift for source and target
            both = self.shifter(np.concatenate([src, tgt]), gen)
            src, tgt = both[: len(src)], both[len(src):]
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

    def _stack(self, items) -> tuple[torch.Tensor, ...]:
        cols = list(zip(*items))
        return tuple(torch.from_numpy(np.stack(c)) for c in cols)  # src (B,S), src_mask (B,S), tgt (B,T), y (B,T)

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
