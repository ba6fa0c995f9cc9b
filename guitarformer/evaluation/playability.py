"""Playability of pieces on the guitar, and how often a fingering matches the human one."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from guitarformer.evaluation.features import Piece
from guitarformer.fingering import UNPLAYABLE, fret
from guitarformer.music.guitar import TPQ


def _onset_groups(p: Piece, frets: Sequence[tuple[int, int]]) -> list[list[int]]:
    groups: dict[float, list[int]] = {}
    for i, t in enumerate(np.round(p.onset, 4)):
        groups.setdefault(float(t), []).append(frets[i][1])
    return [groups[t] for t in sorted(groups)]


def playability(pieces: Sequence[Piece], max_span: int = 4, window: int = 4) -> dict[str, float]:
    """Share of notes `tab.fret` can place in the tuning, share of chords whose fretted notes span at most
    `max_span` frets (5 frets under the hand), and hand-position shifts per bar (a shift = a note outside the
    current `window`-fret position)."""

    notes = placed = chords = ok_chords = shifts = 0
    bars = 0.0
    for p in pieces:
        ticks = [(int(round(o * TPQ)), max(1, int(round(d * TPQ))), int(x)) for o, d, x in
                 zip(p.onset, p.duration, p.pitch)]
        fr = fret(ticks, p.tuning, p.capo, program=p.program)
        notes += len(fr)
        placed += sum(f != UNPLAYABLE for f in fr)
        pos = None
        for g in _onset_groups(p, fr):
            fretted = [f for f in g if f > 0]
            if len([f for f in g if f >= 0]) >= 2 and fretted:
                chords += 1
                ok_chords += max(fretted) - min(fretted) <= max_span
            if not fretted:
                continue
            lo, hi = min(fretted), max(fretted)
            if pos is None:
                pos = lo
            elif lo < pos or hi > pos + window - 1:
                shifts += 1
                pos = lo if lo < pos else max(lo, hi - window + 1)
        bars += p.span / p.bar
    return {"fretable": placed / max(notes, 1), "chord_stretch_ok": ok_chords / chords if chords else math.nan,
            "shifts_per_bar": shifts / max(bars, 1e-9), "notes": notes, "chords": chords}


def fingering_agreement(pieces: Sequence[Piece]) -> dict[str, float]:
    """Share of notes where `tab.fret` picks the same (string, fret) as the human tab (pieces with frets only)."""

    same = total = files = 0
    for p in pieces:
        if not p.frets or len(p.frets) != len(p.pitch):
            continue
        ticks = [(int(round(o * TPQ)), max(1, int(round(d * TPQ))), int(x)) for o, d, x in
                 zip(p.onset, p.duration, p.pitch)]
        ours = fret(ticks, p.tuning, p.capo, program=p.program)
        files += 1
        for h, o in zip(p.frets, ours):
            if tuple(h) != UNPLAYABLE:
                total += 1
                same += tuple(h) == tuple(o)
    return {"agreement": same / total if total else math.nan, "notes": total, "pieces": files}
