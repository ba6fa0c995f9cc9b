"""Bars, defined once: where bar lines fall and which time signature is in force.

One rule for a time signature that falls inside a bar: it takes effect at the next bar line, as MIDI 1.0
and miditok (whose tokens the models see) have it. Every module that counts, cuts or draws bars uses these
functions, so a riff's bars, its controls, its tab and an infilled gap agree.

Time signatures are (tick, numerator, denominator) triples, or anything with `.time`, `.numerator` and
`.denominator` (symusic's); 4/4 holds before the first.
"""

from __future__ import annotations

from typing import Iterable, Sequence

Signature = tuple[int, int, int]  # (tick, numerator, denominator)


def signatures(time_signatures: Iterable) -> list[Signature]:
    """Sorted (tick, numerator, denominator) triples from triples or symusic time signatures."""
    out = []
    for ts in time_signatures:
        if isinstance(ts, (tuple, list)):
            t, num, den = ts
        else:
            t, num, den = ts.time, ts.numerator, ts.denominator
        out.append((int(t), int(num), int(den)))
    return sorted(out)


def bar_length(numerator: int, denominator: int, ticks_per_quarter: int) -> int:
    """Ticks in one bar of numerator/denominator (at least 1)."""
    return max(1, ticks_per_quarter * 4 * numerator // max(1, denominator))


def bars(time_signatures: Iterable, ticks_per_quarter: int, end: int) -> list[tuple[int, int, int, int]]:
    """(start, length, numerator, denominator) of every bar that starts before `end` (at least one bar).

    A signature applies from the first bar line at or after its tick."""
    sigs = signatures(time_signatures)
    out: list[tuple[int, int, int, int]] = []
    tick, num, den, k = 0, 4, 4, 0
    while tick < end or not out:
        while k < len(sigs) and sigs[k][0] <= tick:
            _, num, den = sigs[k]
            k += 1
        length = bar_length(num, den, ticks_per_quarter)
        out.append((tick, length, num, den))
        tick += length
    return out


def bar_lines(time_signatures: Iterable, ticks_per_quarter: int, end: int) -> list[int]:
    """Ticks of the bar lines from 0 up to the first one at or after `end` (so len - 1 bars cover `end`)."""
    spans = bars(time_signatures, ticks_per_quarter, end)
    return [s for s, *_ in spans] + [spans[-1][0] + spans[-1][1]]


def bar_starts(time_signatures: Iterable, ticks_per_quarter: int, end: int) -> list[int]:
    """Start ticks of the bars that start before `end` (at least [0])."""
    return [s for s, *_ in bars(time_signatures, ticks_per_quarter, end)]


def signature_at(time_signatures: Iterable, ticks_per_quarter: int, tick: int) -> tuple[int, int]:
    """(numerator, denominator) of the bar that holds `tick`."""
    _, _, num, den = bars(time_signatures, ticks_per_quarter, tick + 1)[-1]
    return num, den


def bar_index(starts: Sequence[int], tick: int) -> int:
    """Index of the bar (from `bar_starts`) that holds `tick`."""
    lo, hi = 0, len(starts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if starts[mid] <= tick:
            lo = mid
        else:
            hi = mid
    return lo


def count_bars(time_signatures: Iterable, ticks_per_quarter: int, end: int) -> int:
    """Bars up to tick `end` (the last one counted when a note starts in it)."""
    return len(bar_lines(time_signatures, ticks_per_quarter, end)) - 1
