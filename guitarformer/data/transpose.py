"""Transposition augmentation: token windows moved by a random number of semitones, the way a guitarist moves them.

A shift is drawn per window from the shifts that keep every pitch on the neck (E2..E6), or no further off it than
the window already was: a window of a drop-D or 7-string piece with notes below E2 may also stay where it is or
go down, so low-tuned pieces are trained at their own pitch too. Key controls move with the pitches.

Tab tokens: a guitarist transposes a line by moving the hand, so each note keeps its string and its fret moves
by the shift (fret = pitch - open string - capo); shifts that would take a fret off the neck are not drawn. Every
bar's hand-position control (CtrlPos, the median fretted fret) is computed again from the moved frets of the bar's
notes the window holds, so the control stays true of what the model reads.

A note's tuning and capo are those of the last CtrlTuning and CtrlCapo before it in the window (after its piece's
BOS); where the window has none (dropped by data/dataset.py's control dropout), those of its piece's opening
controls as the caller read them from the data (`heads`: one per piece the window holds); else standard tuning
without capo (a dataset without controls, whose tokens say nothing of the guitar). Without `heads`, a window's
controls hold past a BOS, as for an encoder-decoder pair whose target opens with one. A note whose tuning the
controls call "other" (none of music.guitar.TUNINGS) stays where it is: its strings' open pitches are not in the
tokens, so neither its frets nor, in layout 3, its lowest-fret string could be moved truly; a window holding one
draws shift 0.

Tab layout 3 (vocab/tab_tokens.py) writes a note's String only where the note leaves its lowest-fret string, the
string that plays its pitch at the lowest fret in that tuning and capo. A moved note keeps its string, but whether
that is still the lowest-fret string of its new pitch depends on the pitch: a note without a String gets one where
its string no longer is (`String_<its string>`), and a note with one loses it where its string now is. So the moved
window is exactly what `encode` writes for the moved notes (no String on a note on its lowest-fret string, one on
every other): the model never reads a layout its data does not use. Its length changes, by up to one token a note
(a shift up an octave gives most notes a String). Two things let a caller keep the length it needs, as
data/dataset.py does:
  - `length`: keep that many moved tokens, from a window read `slack(length)` tokens longer (a String a shift takes
    out belongs to a note of at least three tokens, so half as many again always suffices, short of the end of the
    data). The draw rules shifts out by the notes that end up in those tokens, not by the slack after them.
  - `context`: the tokens just before the window (`lead`, a note's Pitch .. Duration at most), read and not
    returned, so that a window that begins inside a note has that note's String as the moved pitch needs it.
A String the shift adds belongs to its note: it comes right after the note's Duration, so a window that begins
just after that Duration begins with it. A shift of 0 leaves a window as it is. Layout 2 (a String on every note)
and other tokenizers keep every token in its place: only pitches, key controls and CtrlPos change.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from guitarformer.vocab.controls import POS_VALUES, control_type, position_value
from guitarformer.vocab.tab_tokens import MAX_STRINGS, implied_strings, is_tab_tokenizer, note_offset
from guitarformer.music.guitar import MAX_FRET, PITCH_NAMES, STANDARD_TUNING, TUNINGS

GUITAR_LOW, GUITAR_HIGH = 40, 88  # E2 .. E6: transposition keeps every note on a standard-tuned 24-fret neck
PITCHES = 128  # MIDI pitches: the range of the lowest-fret-string tables


class PitchShifter:
    """Transposes token ids by semitones, guitar-aware (module docstring).

    Per-token lookups have one entry more than the vocabulary: index V stands for "past the window's end", so that
    a note's Duration or String slot can be looked up without bounds checks."""

    def __init__(self, tokenizer, max_shift: int):
        self.max_shift = max_shift
        V = len(tokenizer)
        self.pitch_of = np.full(V + 1, -1, dtype=np.int64)
        self.string_of = np.zeros(V + 1, dtype=np.int64)  # tab tokens: String_s -> s (0: not a String)
        self.string_id = np.full(MAX_STRINGS + 1, -1, dtype=np.int64)  # s -> the id of String_s
        self.is_duration = np.zeros(V + 1, dtype=bool)
        self.is_velocity = np.zeros(V + 1, dtype=bool)
        self.id_of: dict[int, int] = {}
        for tok_str, i in tokenizer.vocab.items():
            kind, _, value = tok_str.partition("_")
            if kind == "Pitch":
                self.pitch_of[i] = int(value)
                self.id_of[int(value)] = i
            elif kind == "String":
                self.string_of[i] = int(value)
                if int(value) <= MAX_STRINGS:
                    self.string_id[int(value)] = i
            self.is_duration[i] = kind == "Duration"
            self.is_velocity[i] = kind == "Velocity"
        tab = is_tab_tokenizer(tokenizer)
        self.offset = note_offset(tokenizer) if tab else 0  # a String's distance to its Pitch (0: no strings)
        self.velocities = tab and bool(tokenizer.config.use_velocities)
        self.resizes = implied_strings(tokenizer)  # layout 3: a shift adds and removes String tokens
        # Guitar controls: the tuning (an index into self.tunings, 0 = standard) and capo each token sets (-1: none).
        self.tunings: list[tuple[int, ...]] = [STANDARD_TUNING]
        self.named: list[bool] = [True]  # False for "other": the tokens do not say which tuning
        self.tuning_at = np.full(V + 1, -1, dtype=np.int64)
        self.capo_at = np.full(V + 1, -1, dtype=np.int64)
        for t, i in tokenizer.vocab.items():
            if (name := _value(t, "Tuning")) is not None:
                self.tuning_at[i] = len(self.tunings)
                self.tunings.append(TUNINGS.get(name, STANDARD_TUNING))  # "other": pinned (module docstring)
                self.named.append(name in TUNINGS)
            elif (capo := _value(t, "Capo")) is not None:
                self.capo_at[i] = int(capo)
        self._guitars: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, int, bool]] = {}  # (tuning, capo) ->
        self._stacked: dict[tuple[int, ...], tuple[np.ndarray, ...]] = {}  # the tables of a window's guitars
        self.pos_id = {_value(t, "Pos"): i for t, i in tokenizer.vocab.items() if _value(t, "Pos") is not None}
        self.is_pos = np.zeros(V + 1, dtype=bool)
        self.is_pos[list(self.pos_id.values())] = True
        self.bar = tokenizer.vocab.get("Bar_None", -1)
        self.bos = tokenizer.vocab.get("BOS_None", -1)
        # Key controls ("CtrlKey_E:minor") move with the pitches.
        keys = {_value(t, "Key"): i for t, i in tokenizer.vocab.items() if _value(t, "Key") is not None}
        self.tables: dict[int, np.ndarray] = {}
        for s in range(-max_shift, max_shift + 1):
            t = np.arange(V, dtype=np.int64)
            for p, i in self.id_of.items():
                t[i] = self.id_of.get(p + s, i)
            for key, i in keys.items():
                tonic, mode = key.split(":")
                t[i] = keys.get(f"{PITCH_NAMES[(PITCH_NAMES.index(tonic) + s) % 12]}:{mode}", i)
            self.tables[s] = t

    def slack(self, length: int) -> int:
        """How many tokens more than `length` a window must be read with so that its moved tokens fill `length`
        (module docstring): none where a shift keeps every token (layout 2, other tokenizers)."""
        return length // 2 + 2 if self.resizes and self.max_shift > 0 else 0

    def lead(self, tokens: np.ndarray, index: int) -> np.ndarray:
        """The context a window that starts at `index` of the token stream `tokens` needs: the tokens before it
        that a note can have before its String (Pitch [Velocity] Duration), from the window's own piece (none
        before a BOS). None where a shift keeps every token."""
        n = self.offset if self.resizes and self.max_shift > 0 else 0
        w = np.asarray(tokens[max(0, index - n): index] if n else tokens[:0], dtype=np.int64)
        bos = np.nonzero(w == self.bos)[0]
        return w[bos[-1] + 1:] if len(bos) else w

    def __call__(self, window: np.ndarray, gen: torch.Generator, length: int | None = None,
                 context: slice | None = None, heads: Sequence[np.ndarray] | None = None) -> np.ndarray:
        """The window moved by a shift drawn from `gen` (`move`)."""
        return self.move(window, gen, length, context, heads)[0]

    def move(self, window: np.ndarray, gen: torch.Generator, length: int | None = None,
             context: slice | None = None, heads: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(moved tokens, the index in `window` each comes from): the window moved by a shift drawn from `gen`,
        without its `context` positions, cut to `length` tokens (None: all of them). `heads`: the opening control
        ids of the piece the window begins in, then of each piece whose BOS it holds (module docstring). An added
        String comes from its note's Duration. Nothing is drawn from `gen` when no Pitch is returned."""
        w = np.asarray(window, dtype=np.int64)
        n, limit = len(w), _bound(length)
        ctx = np.zeros(n, dtype=bool)
        if context is not None:
            ctx[context] = True
        if self.resizes and length is not None:
            # Every token but a String is returned, so the first `length` returned come from the tokens up to where
            # `length` of those are read; the few after them hold the last note's String.
            read = np.cumsum((self.string_of[w] == 0) & ~ctx)
            if read.size and read[-1] > length:
                n = min(n, int(np.searchsorted(read, length)) + 1 + self.offset)
                w, ctx = w[:n], ctx[:n]
        P = np.nonzero(self.pitch_of[w] >= 0)[0]
        base = P - np.concatenate([[0], np.cumsum(ctx)])[P]  # each Pitch's place among the tokens returned
        look = ~ctx[P]  # the Pitch tokens returned (context ones are read only)
        if self.max_shift <= 0 or not (look & (base < limit)).any():
            keep = np.nonzero(~ctx)[0][:limit]
            return w[keep], keep
        m = self.max_shift
        shifts = np.arange(-m, m + 1)
        pitch = self.pitch_of[w[P]]
        g, string, known, has, slot, fret, fretted, low, pinned = self._notes(w, P, pitch, heads)
        # Each Pitch allows the shifts in [lo, hi] (0 always among them): no further off the neck than it is.
        lo, hi = np.minimum(0, GUITAR_LOW - pitch), np.maximum(0, GUITAR_HIGH - pitch)
        lo, hi = np.where(pinned, 0, lo), np.where(pinned, 0, hi)  # an "other" tuning: not moved
        lo = np.where(fretted, np.maximum(lo, np.minimum(0, -fret)), lo)
        hi = np.where(fretted, np.minimum(hi, np.maximum(MAX_FRET - fret, 0)), hi)
        delta = np.zeros((len(shifts), len(P)), dtype=np.int64)  # String tokens each note gains (+1) or loses (-1)
        if self.resizes:
            moved_low = low[g[None, :], np.clip(pitch[None, :] + shifts[:, None], 0, PITCHES - 1)]  # (shifts, notes)
            counted = known & ~ctx[np.minimum(slot, n - 1)]  # a String slot in the context is not returned
            delta = np.where(counted, (string != moved_low).astype(np.int64) - has, 0)
            delta[m] = 0  # shift 0: the window as it is
        at = base + np.cumsum(delta, axis=1) - delta  # (shifts, notes): each Pitch's place after the shift
        seen = look & (at < limit)
        ok = (~seen | ((lo <= shifts[:, None]) & (shifts[:, None] <= hi))).all(axis=1)
        options = shifts[ok]
        s = int(options[int(torch.randint(0, len(options), (1,), generator=gen))])
        out, src, keep = self.tables[s][w], np.arange(n), ~ctx
        d = delta[s + m]
        if d.any():
            keep[slot[d < 0]] = False
            add = slot[d > 0]
            out = np.insert(out, add, self.string_id[string[d > 0]])
            keep = np.insert(keep, add, True)
            src = np.insert(src, add, add - 1)
        out, src = out[keep][:limit], src[keep][:limit]
        if s and self.is_pos[out].any():
            # The notes returned whole (Pitch .. Duration) give the positions, each on the string it is played on.
            held = seen[s + m] & fretted & (at[s + m] + self.offset - 1 < len(out))
            self._positions(out, at[s + m][held], fret[held] + s)
        return out, src

    def _notes(self, w: np.ndarray, P: np.ndarray, pitch: np.ndarray, heads: Sequence[np.ndarray] | None):
        """Per Pitch token at P: (g, string, known, has, slot, fret, fretted, low, pinned). g: the note's guitar, an
        index into low: (guitars, PITCHES) lowest-fret strings; string: the note's string where `known` (layout 3: its
        Duration is in the window with the String slot after it, so the slot says it; layout 2: its String is in
        the window); has: 1 where a String is written; slot: where the String is or would go; fret: on that string
        under the note's guitar, `fretted` where that string exists; pinned: its tuning is "other"."""
        n = len(w)
        g, fret0, low, strings, named = self._guitar_of(w, P, heads)
        pinned = ~named[g]
        zeros = np.zeros(len(P), dtype=np.int64)
        if not self.offset:
            none = np.zeros(len(P), dtype=bool)
            return g, zeros, none, zeros, P, zeros, none, low, pinned
        padded = np.append(w, np.full(self.offset + 1, len(self.pitch_of) - 1))  # V: past the window's end
        slot = P + self.offset
        whole = self.is_duration[padded[slot - 1]] & (slot < n)  # Pitch [Velocity] Duration, then the slot
        if self.velocities:
            whole &= self.is_velocity[padded[P + 1]]
        written = np.where(whole, self.string_of[padded[slot]], 0)
        has = (written > 0).astype(np.int64)
        if self.resizes:
            known = whole
            string = np.where(has > 0, written, low[g, np.clip(pitch, 0, PITCHES - 1)])
        else:
            known, string = has > 0, written
        fretted = known & (string >= 1) & (string <= strings[g])
        fret = pitch - fret0[g, np.clip(string, 0, MAX_STRINGS)]
        return g, string, known, has, slot, fret, fretted, low, pinned

    def _guitar_of(self, w: np.ndarray, P: np.ndarray, heads: Sequence[np.ndarray] | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(guitar index per Pitch, fret-0 pitch per (guitar, string), lowest-fret string per (guitar, pitch),
        strings per guitar, whether each guitar's tuning is named): each note's tuning and capo (module docstring),
        from tables built once per guitar."""
        tuning, capo = self.tuning_at[w], self.capo_at[w]
        last_t, last_c = _last(np.nonzero(tuning >= 0)[0], P), _last(np.nonzero(capo >= 0)[0], P)
        if not heads:  # no piece is known: the window's own controls hold on past a BOS
            t = np.where(last_t >= 0, tuning[last_t], 0)
            c = np.where(last_c >= 0, capo[last_c], 0)
        else:  # after each BOS, the next piece's own controls, else the ones the caller read for it
            bos = np.nonzero(w == self.bos)[0]
            piece = np.minimum(np.searchsorted(bos, P), len(heads) - 1)
            t0, c0 = np.array([self._head(h) for h in heads], dtype=np.int64).reshape(-1, 2)[piece].T
            last_b = _last(bos, P)
            t = np.where(last_t > last_b, tuning[last_t], t0)
            c = np.where(last_c > last_b, capo[last_c], c0)
        keys, g = np.unique(t * 64 + c, return_inverse=True)
        key = tuple(keys.tolist())
        if key not in self._stacked:
            self._stacked[key] = tuple(np.stack(x) for x in zip(*(self._guitar(k // 64, k % 64) for k in key)))
        return (g.reshape(-1), *self._stacked[key])

    def _head(self, head: np.ndarray) -> tuple[int, int]:
        """(tuning index, capo) of a piece's opening control ids (standard tuning, no capo where they say none)."""
        ids = np.asarray(head, dtype=np.int64)
        t, c = self.tuning_at[ids], self.capo_at[ids]
        return int(t[t >= 0][-1]) if (t >= 0).any() else 0, int(c[c >= 0][-1]) if (c >= 0).any() else 0

    def _guitar(self, t: int, capo: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """(fret-0 pitch per string 1.., lowest-fret string per pitch, strings, named) of tuning t with this capo:
        `lowest_fret_string` for every pitch at once (the lowest string where none plays it)."""
        if (t, capo) not in self._guitars:
            tuning = self.tunings[t]
            k = len(tuning)  # at most MAX_STRINGS: TabREMI refuses a part with more
            open_ = np.array([tuning[k - s] + capo for s in range(1, k + 1)], dtype=np.int64)  # strings 1..k
            fret0 = np.zeros(MAX_STRINGS + 1, dtype=np.int64)
            fret0[1: k + 1] = open_
            frets = np.arange(PITCHES)[:, None] - open_[None, :]
            frets = np.where(frets >= 0, frets, 10 ** 6)
            low = np.argmin(frets, axis=1) + 1  # ties: the first string, as min((fret, string)) picks
            low[(frets == 10 ** 6).all(axis=1)] = min(k, MAX_STRINGS)
            self._guitars[t, capo] = (fret0, low, k, self.named[t])
        return self._guitars[t, capo]

    def _positions(self, out: np.ndarray, j: np.ndarray, frets: np.ndarray) -> None:
        """Write each bar's CtrlPos again from the moved frets of its notes (their Pitch at j) in `out` (in place),
        as vocab/controls.py computes it: the bin of the median fretted fret, the lowest bin where every note is
        open; a bar without a note a string can play keeps its CtrlPos."""
        bars = np.nonzero(out == self.bar)[0]
        pos = np.nonzero(self.is_pos[out])[0]
        pos_bar = np.searchsorted(bars, pos, side="right") - 1  # the bar each CtrlPos follows
        pos, pos_bar = pos[pos_bar >= 0], pos_bar[pos_bar >= 0]
        first = pos - bars[pos_bar] < 8  # a bar's controls come right after its Bar
        pos_bar, k = np.unique(pos_bar[first], return_index=True)
        pos = pos[first][k]
        note_bar = np.searchsorted(bars, j, side="right") - 1
        playable = (note_bar >= 0) & (frets >= 0) & (frets <= MAX_FRET)
        played = np.bincount(note_bar[playable], minlength=len(bars))
        fretted = playable & (frets > 0)
        b, f = note_bar[fretted], frets[fretted]
        order = np.lexsort((f, b))
        b, f = b[order], f[order]
        count = np.bincount(b, minlength=len(bars))
        start = np.cumsum(count) - count
        middle = (f[np.minimum(start + (count - 1) // 2, len(f) - 1)] + f[np.minimum(start + count // 2, len(f) - 1)]
                  if len(f) else np.zeros(len(bars), dtype=np.int64))
        write = played[pos_bar] > 0
        for at, b in zip(pos[write].tolist(), pos_bar[write].tolist()):  # a few bars: vocab/controls.py's own bins
            out[at] = self.pos_id[position_value(middle[b] / 2) if count[b] else POS_VALUES[0]]


def _last(at: np.ndarray, P: np.ndarray) -> np.ndarray:
    """For each index in P, the last of the sorted indices `at` before it (-1: none)."""
    k = np.searchsorted(at, P)
    return np.where(k > 0, at[np.maximum(k - 1, 0)], -1) if len(at) else np.full(len(P), -1)


def _bound(length: int | None) -> int:
    """`length` as a slice bound: None keeps every token."""
    return np.iinfo(np.int64).max if length is None else length


def _value(token: str, control: str) -> str | None:
    """The value of a control token of this control ("CtrlPos_5-9", "Pos" -> "5-9"); None for other tokens."""
    prefix = control_type(control) + "_"
    return token[len(prefix):] if token.startswith(prefix) else None
