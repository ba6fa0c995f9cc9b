"""Form: how much a piece repeats itself, bar by bar.

A riff or a fiddle tune states a bar and plays it again; a model that never does writes music without form. The
measure is the share of a piece's first `bars` bars (16 by default) whose notes repeat an earlier bar of the piece
exactly: the same pitches, starting at the same places in the bar, held as long. A bar without notes repeats
nothing. Bars come from the piece's time signatures (music/bars.py), and each note belongs to the bar it starts in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import symusic

from guitarformer.music.bars import bar_index, bar_starts

FORM_BARS = 16  # the opening a listener hears as the riff; a tune's first strain is 8 or 16 bars

BarNotes = tuple[tuple[int, int, int], ...]  # (onset in the bar, duration, pitch), sorted


def bar_notes(score: symusic.Score, max_bars: int = FORM_BARS) -> list[BarNotes]:
    """The notes of the score's first `max_bars` bars (every track), each bar as sorted (onset - bar start,
    duration, pitch); in the score's ticks. A piece shorter than `max_bars` gives all its bars."""
    notes = [(int(n.time), int(n.duration), int(n.pitch)) for t in score.tracks for n in t.notes]
    if not notes:
        return []
    starts = bar_starts(score.time_signatures, score.ticks_per_quarter, max(t for t, _, _ in notes) + 1)
    per_bar: list[list[tuple[int, int, int]]] = [[] for _ in starts[:max_bars]]
    for t, d, p in notes:
        k = bar_index(starts, t)
        if k < max_bars:
            per_bar[k].append((t - starts[k], d, p))
    return [tuple(sorted(b)) for b in per_bar]


def repeat_share(bars: Sequence[BarNotes]) -> float | None:
    """The share of `bars` that have notes and repeat an earlier one exactly; None for no bars."""
    if not bars:
        return None
    seen: set[BarNotes] = set()
    repeats = 0
    for b in bars:
        if b and b in seen:
            repeats += 1
        seen.add(b)
    return repeats / len(bars)


@dataclass(frozen=True)
class FormReport:
    """The repeat share over a set of pieces: its mean, the pieces counted and the bars looked at."""

    repeat_share: float
    pieces: int
    bars: int


def form_report(scores: Iterable[symusic.Score], max_bars: int = FORM_BARS) -> FormReport:
    """Mean `repeat_share` of the first `max_bars` bars over the pieces that have notes."""
    shares, n_bars = [], 0
    for score in scores:
        bars = bar_notes(score, max_bars)
        share = repeat_share(bars)
        if share is not None:
            shares.append(share)
            n_bars += len(bars)
    return FormReport(float(np.mean(shares)) if shares else 0.0, len(shares), n_bars)
