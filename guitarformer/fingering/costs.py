"""Fingering costs: every cost is a weight times a feature count, so the weights can be fit on human tabs.

The feature layout (below) fixes the order of `FretCosts.vector()` and `fingering_features`; the fitted
weights are data, in weights.json beside this file (benchmarks/bench_fretting.py --fit writes new ones).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

WEIGHTS_FILE = Path(__file__).with_name("weights.json")

# Layout of the weight/feature vector:
N_FRET = 25  # per note: fret 0..24 (higher frets share the last bin)
N_STRING = 8  # per note: tab string 1..8
N_SPAN = 7  # per chord: fretted span 0..5, 6+
MOVE_BIN = (0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 8, 8) + (9,) * 12  # |hand shift| 0..24 frets -> bin
N_MOVE = 10
FRET0 = 0
STRING0 = FRET0 + N_FRET
SPAN0 = STRING0 + N_STRING
GAP = SPAN0 + N_SPAN  # per unused string inside a chord's string range
MOVE0 = GAP + 1
MOVE_REST = MOVE0 + N_MOVE  # per fret of hand shift (up to 12) when nothing sounds at the onset
JUMP = MOVE_REST + 1  # per string the mean string moves
CONTRARY = JUMP + 1  # single note to single note: string moves against the pitch direction
SAME = CONTRARY + 1  # single note to single note on the same string...
SLIDE = SAME + 1  # ...per fret moved along it
CUT = SLIDE + 1  # per string re-used while its previous note still sounds
OPEN5 = CUT + 1  # per open string while the hand is at fret 5 or above
OPEN9 = OPEN5 + 1  # ...and again at fret 9 or above
SP_BIN = (0,) + (1,) * 4 + (2,) * 4 + (3,) * 4 + (4,) * 12  # fret 0..24 -> open, 1-4, 5-8, 9-12, 13+
N_SP = 5
SP0 = OPEN9 + 1  # per note, by (tab string, fret bin): which region of the neck a string is played in
# Hand window (a lazily moving hand): the index finger at fret h covers frets h..h+3; an onset whose fretted notes
# fit leaves h where it is, else h moves the least that covers them. Per onset, that move in bins:
WIN_BIN = (0, 1, 2, 3, 4, 5, 6, 6, 6) + (7,) * 16  # 0, 1, 2, 3, 4, 5, 6-8, 9+
N_WIN = 8
WIN0 = SP0 + N_STRING * N_SP
SF0 = WIN0 + N_WIN  # per note, by (tab string 1..8, fret 0..24)
N_BASE = SF0 + N_STRING * N_FRET  # features of one fingering on its own (the first pass uses only these)
# Piece-level features (second pass): per note, agreement of the candidate string with what the FIRST pass chose
# elsewhere in the same part (never with the human tab, so they are the same at fit and test time).
PIECE0 = N_BASE
P_PITCH = PIECE0  # share of the part's other notes of this pitch that pass 1 put on this string
P_BIGRAM = P_PITCH + 1  # ...of the other notes of this pitch after the same previous pitch
P_TRIGRAM = P_BIGRAM + 1  # ...with the same previous and next pitch (a repeated phrase)
P_PREV = P_TRIGRAM + 1  # 1 if pass 1 put the previous note of this pitch on this string
P_NEXT = P_PREV + 1  # ...the next note of this pitch
P_REGION = P_NEXT + 1  # share of the part's other notes that pass 1 played in this note's fret region
P_LOCAL = P_REGION + 1  # ...of the notes within 8 onsets either side
# Also per note, from the pitches alone: its fret region (as SP_BIN) x the band of the highest pitch within 6
# onsets either side (up to E4 = 64, 65-69, 70-74, 75-79, 80+): a passage that climbs is played higher.
P_REACH = P_LOCAL + 1
REACH_BANDS = (65, 70, 75, 80)
N_PIECE = P_REACH + N_SP * (len(REACH_BANDS) + 1) - PIECE0
N_FROM_FIRST = P_REACH - PIECE0  # piece features computed from a first pass; the rest need only the pitches
N_FEATURES = PIECE0 + N_PIECE

_W = json.loads(WEIGHTS_FILE.read_text())
_FIRST, _FITTED = tuple(_W["first"]), tuple(_W["second"])
_DISTORTED_FIRST, _DISTORTED = tuple(_W["distorted_first"]), tuple(_W["distorted_second"])


@dataclass(frozen=True)
class FretCosts:
    """Weights of the fingering cost (each multiplies a feature count; see `fingering_features`).

    Defaults are fit on human tabs (benchmarks/bench_fretting.py --fit, docs/results/FRETTING.md)."""

    fret: tuple[float, ...] = _FITTED[FRET0:STRING0]  # per note, by fret 0..24
    string: tuple[float, ...] = _FITTED[STRING0:SPAN0]  # per note, by tab string 1..8
    span: tuple[float, ...] = _FITTED[SPAN0:GAP]  # per chord, by span of its fretted notes 0..5, 6+
    string_gap: float = _FITTED[GAP]
    move: tuple[float, ...] = _FITTED[MOVE0:MOVE_REST]  # per onset, by hand shift bin (see MOVE_BIN)
    move_after_rest: float = _FITTED[MOVE_REST]
    string_jump: float = _FITTED[JUMP]
    contrary: float = _FITTED[CONTRARY]
    same_string: float = _FITTED[SAME]
    slide: float = _FITTED[SLIDE]
    cut_sustain: float = _FITTED[CUT]
    open_at_5: float = _FITTED[OPEN5]
    open_at_9: float = _FITTED[OPEN9]
    string_region: tuple[float, ...] = _FITTED[SP0:WIN0]  # per note, by (tab string 1..8, fret 0, 1-4, 5-8, 9-12, 13+)
    window: tuple[float, ...] = _FITTED[WIN0:SF0]  # per onset, by hand-window move bin (see WIN_BIN)
    string_fret: tuple[float, ...] = _FITTED[SF0:N_BASE]  # per note, by (tab string 1..8, fret 0..24)
    piece: tuple[float, ...] = _FITTED[PIECE0:]  # second pass: agreement with the first pass elsewhere in the part
    # Weights (N_FEATURES of them; those of features computed from a first pass are 0) of the first pass that
    # the piece features are computed from; None: this vector's own. No weight on a feature computed from a
    # first pass: one pass only.
    first_pass: tuple[float, ...] | None = _FIRST
    max_span: int = 5  # fixed, not fit: spans beyond this cost `impossible` (still allowed if nothing else fits)
    impossible: float = 50.0
    dropped: float = 1000.0  # per chord note left without a string
    # Learned string model (guitarformer/fingering/string_model.py): per note, nn_weight * -log p(string | context) is added
    # to the cost, in both passes. Fixed, not part of `vector()`; 0 (or no weights file): hand-made costs only.
    nn_weight: float = 0.5

    def vector(self) -> np.ndarray:
        """The fitted weights as one vector in `fingering_features` order."""
        w = [*self.fret, *self.string, *self.span, self.string_gap, *self.move, self.move_after_rest, self.string_jump,
             self.contrary, self.same_string, self.slide, self.cut_sustain, self.open_at_5, self.open_at_9, *self.string_region,
             *self.window, *self.string_fret, *self.piece]
        if len(w) != N_FEATURES:
            raise ValueError(f"FretCosts has {len(w)} weights, expected {N_FEATURES}")
        return np.asarray(w, dtype=float)

    def first(self) -> "FretCosts":
        """The first-pass costs: `first_pass` (or this vector) without the terms that need a first pass."""
        w = self.vector() if self.first_pass is None else np.array(self.first_pass, dtype=float)
        w[PIECE0:PIECE0 + N_FROM_FIRST] = 0.0
        return FretCosts.from_vector(w, first_pass=None, max_span=self.max_span, impossible=self.impossible,
                                     dropped=self.dropped, nn_weight=self.nn_weight)

    @classmethod
    def from_vector(cls, w: Sequence[float], **fixed: Any) -> "FretCosts":
        w = [float(x) for x in w]
        if len(w) != N_FEATURES:
            raise ValueError(f"{len(w)} weights, expected {N_FEATURES}")
        return cls(
            fret=tuple(w[FRET0:STRING0]), string=tuple(w[STRING0:SPAN0]), span=tuple(w[SPAN0:GAP]),
            string_gap=w[GAP], move=tuple(w[MOVE0:MOVE_REST]), move_after_rest=w[MOVE_REST],
            string_jump=w[JUMP], contrary=w[CONTRARY], same_string=w[SAME], slide=w[SLIDE], cut_sustain=w[CUT],
            open_at_5=w[OPEN5], open_at_9=w[OPEN9], string_region=tuple(w[SP0:WIN0]),
            window=tuple(w[WIN0:SF0]), string_fret=tuple(w[SF0:N_BASE]), piece=tuple(w[PIECE0:]), **fixed,
        )


DEFAULT_COSTS = FretCosts()
DISTORTED_PROGRAMS = (29, 30)  # General MIDI overdriven guitar, distortion guitar
DISTORTED_COSTS = FretCosts.from_vector(_DISTORTED, first_pass=_DISTORTED_FIRST)


def costs_for_program(program: int | None) -> FretCosts:
    """The fitted costs for a track's General MIDI program: distorted electric guitar (29-30) has its own (riffs
    on the low strings, power chords in position), everything else the default (fit mostly on classical tab)."""
    return DISTORTED_COSTS if program in DISTORTED_PROGRAMS else DEFAULT_COSTS
