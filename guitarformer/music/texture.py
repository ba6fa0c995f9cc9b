"""Texture, defined once: how busy (density) and how thick (polyphony) a stretch of notes is.

  density    distinct onsets per quarter note: a strummed chord counts once, so density says how often the hand
             strikes and polyphony stays a measure of its own;
  polyphony  notes per onset (notes that start together): 1 = single notes, 3+ = chords.

The Density and Poly controls (vocab/controls.py) bin these per bar; `guitarformer eval` (evaluation/features.py)
compares their per-piece values between samples and real music. Onsets are in any unit (ticks, quarters) as
long as notes that start together have equal onsets.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

MAX_POLYPHONY_CLASS = 3  # onsets of three or more notes are all chords


def onset_sizes(onsets: Iterable[float]) -> list[int]:
    """How many notes start at each distinct onset, in time order."""
    counts = Counter(onsets)
    return [counts[t] for t in sorted(counts)]


def density(onsets: Iterable[float], quarters: float) -> float:
    """Distinct onsets per quarter note over a stretch `quarters` long; NaN without notes."""
    sizes = onset_sizes(onsets)
    return len(sizes) / quarters if sizes else math.nan


def polyphony(onsets: Iterable[float]) -> float:
    """Mean notes per onset (1 = single notes); NaN without notes."""
    sizes = onset_sizes(onsets)
    return sum(sizes) / len(sizes) if sizes else math.nan


def polyphony_class(onsets: Iterable[float]) -> int:
    """The most common onset size, 1 / 2 / 3 (3: three or more notes), a tie going to the larger; 0 without notes."""
    sizes = onset_sizes(onsets)
    if not sizes:
        return 0
    counts = Counter(min(k, MAX_POLYPHONY_CLASS) for k in sizes)
    return max(range(1, MAX_POLYPHONY_CLASS + 1), key=lambda c: (counts[c], c))
