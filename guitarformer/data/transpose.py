"""Transposition augmentation: token windows moved by a random number of semitones, the way a guitarist moves them.

A shift is drawn per window from the shifts that keep every pitch on the neck (E2..E6), or no further off it than
the window already was: a window of a drop-D or 7-string piece with notes below E2 may also stay where it is or
go down, so low-tuned pieces are trained at their own pitch too. Key controls move with the pitches.

Tab tokens: a guitarist transposes a line by moving the hand, so each note keeps its string and its fret moves
by the shift (fret = pitch - open string - capo, with the tuning and capo of the window's CtrlTuning and CtrlCapo
tokens, standard tuning without capo where the window has none); shifts that would take a fret off the neck are
not drawn. Every bar's hand-position control (CtrlPos, the median fretted fret) is computed again from the
moved frets of the bar's notes the window holds, so the control stays true of what the model reads.
"""

from __future__ import annotations

from statistics import median

import numpy as np
import torch

from guitarformer.data.controls import POS_VALUES, control_type, position_value
from guitarformer.data.tab_tokens import is_tab_tokenizer, note_offset
from guitarformer.music.guitar import MAX_FRET, PITCH_NAMES, STANDARD_TUNING, TUNINGS, pitch_of

GUITAR_LOW, GUITAR_HIGH = 40, 88  # E2 .. E6: transposition keeps every note on a standard-tuned 24-fret neck


class PitchShifter:
    """Transposes token ids by semitones, guitar-aware (module docstring)."""

    def __init__(self, tokenizer, max_shift: int):
        self.max_shift = max_shift
        V = len(tokenizer)
        self.pitch_of = np.full(V, -1, dtype=np.int64)
        self.string_of = np.zeros(V, dtype=np.int64)  # tab tokens: String_s -> s (0: not a String)
        self.id_of: dict[int, int] = {}
        for tok_str, i in tokenizer.vocab.items():
            kind, _, value = tok_str.partition("_")
            if kind == "Pitch":
                self.pitch_of[i] = int(value)
                self.id_of[int(value)] = i
            elif kind == "String":
                self.string_of[i] = int(value)
        self.offset = note_offset(tokenizer) if is_tab_tokenizer(tokenizer) else 0  # String's distance to its Pitch
        self.tuning_of = {i: TUNINGS.get(_value(t, "Tuning"), STANDARD_TUNING) for t, i in tokenizer.vocab.items()
                          if _value(t, "Tuning") is not None}
        self.capo_of = {i: int(_value(t, "Capo")) for t, i in tokenizer.vocab.items() if _value(t, "Capo") is not None}
        self.pos_id = {_value(t, "Pos"): i for t, i in tokenizer.vocab.items() if _value(t, "Pos") is not None}
        self.is_pos = np.zeros(V, dtype=bool)
        self.is_pos[list(self.pos_id.values())] = True
        self.bar = tokenizer.vocab.get("Bar_None", -1)
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

    def __call__(self, window: np.ndarray, gen: torch.Generator) -> np.ndarray:
        if self.max_shift <= 0:
            return window
        pitches = self.pitch_of[window]
        pitches = pitches[pitches >= 0]
        if pitches.size == 0:
            return window
        # Never further off the neck than the window already is: 0 is always a choice.
        lo = max(-self.max_shift, min(0, GUITAR_LOW - int(pitches.min())))
        hi = min(self.max_shift, max(0, GUITAR_HIGH - int(pitches.max())))
        j, frets = self._frets(window)
        if frets.size:  # every fret stays on the neck, or no further off it than it was
            fmin, fmax = int(frets.min()), int(frets.max())
            lo, hi = max(lo, min(0, -fmin)), min(hi, max(MAX_FRET, fmax) - fmax)
        if lo > hi:
            return window
        s = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        out = self.tables[s][window]
        if s and self.is_pos[window].any():
            self._positions(out, j, frets + s)
        return out

    def _frets(self, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices of the String tokens whose note's Pitch is in the window, their frets) under the window's
        tuning and capo (module docstring)."""
        if not self.offset:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        tuning, capo = STANDARD_TUNING, 0
        for i in window[:8].tolist():  # the piece controls come first, right after BOS
            tuning = self.tuning_of.get(i, tuning)
            capo = self.capo_of.get(i, capo)
        fret0 = np.zeros(max(len(tuning), int(self.string_of.max())) + 1, dtype=np.int64)  # fret 0 per string
        fret0[1: len(tuning) + 1] = [pitch_of(s, 0, tuning, capo) for s in range(1, len(tuning) + 1)]
        j = np.nonzero(self.string_of[window[self.offset:]] > 0)[0] + self.offset
        pitch = self.pitch_of[window[j - self.offset]]
        strings = self.string_of[window[j]]
        ok = (pitch >= 0) & (strings <= len(tuning))
        return j[ok], pitch[ok] - fret0[strings[ok]]

    def _positions(self, out: np.ndarray, j: np.ndarray, frets: np.ndarray) -> None:
        """Write each bar's CtrlPos again from the moved frets of its notes in the window (in place)."""
        bars = np.nonzero(out == self.bar)[0]
        for k, start in enumerate(bars.tolist()):
            end = int(bars[k + 1]) if k + 1 < len(bars) else len(out)
            pos = [q for q in range(start + 1, min(end, start + 8)) if self.is_pos[out[q]]]
            played = [int(f) for f in frets[(j > start) & (j < end)] if 0 <= f <= MAX_FRET]
            if not pos or not played:  # as data/controls.py: no Pos without a note a string can play
                continue
            fretted = [f for f in played if f > 0]
            out[pos[0]] = self.pos_id[position_value(median(fretted)) if fretted else POS_VALUES[0]]


def _value(token: str, control: str) -> str | None:
    """The value of a control token of this control ("CtrlPos_5-9", "Pos" -> "5-9"); None for other tokens."""
    prefix = control_type(control) + "_"
    return token[len(prefix):] if token.startswith(prefix) else None
