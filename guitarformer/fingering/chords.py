"""Each onset's candidate fingerings for fret()'s Viterbi (viterbi.py): the `_BEAM` cheapest assignments of a chord's
notes to distinct strings by the fitted chord cost (`chord_cands`, each a `Cand`), one list per onset
(`candidate_layers`), lists of equal chords shared and kept per (cost weights, guitar) for later parts (`_CANDS`).
`chord_features` is also the chord half of viterbi.fingering_features, the cost's reference."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from guitarformer.fingering.costs import (
    FRET0,
    GAP,
    N_FRET,
    N_SP,
    N_SPAN,
    N_STRING,
    SF0,
    SP0,
    SP_BIN,
    SPAN0,
    STRING0,
    N_FEATURES,
    FretCosts,
)
from guitarformer.fingering.notes import UNPLAYABLE


_BEAM = 16  # fingerings kept per onset (by chord cost) before the Viterbi pass


def chord_features(assign: Sequence[tuple[int, int]], n_strings: int, acc: np.ndarray) -> tuple[int, int]:
    """Add one chord's features to `acc`; return (dropped notes, 1 if the span is beyond reach else 0) for the fixed
    costs."""
    played = [(s, f) for s, f in assign if s >= 0]
    fretted = [f for _, f in played if f > 0]
    for s, f in played:
        acc[FRET0 + min(f, N_FRET - 1)] += 1
        acc[STRING0 + min(n_strings - s, N_STRING) - 1] += 1
        acc[SP0 + (min(n_strings - s, N_STRING) - 1) * N_SP + SP_BIN[min(f, 24)]] += 1
        acc[SF0 + (min(n_strings - s, N_STRING) - 1) * N_FRET + min(f, N_FRET - 1)] += 1
    span = max(fretted) - min(fretted) if fretted else 0
    if fretted:
        acc[SPAN0 + min(span, N_SPAN - 1)] += 1
    if len(played) > 1:
        strings = [s for s, _ in played]
        acc[GAP] += max(strings) - min(strings) + 1 - len(played)
    return len(assign) - len(played), span


class Cand:
    """One fingering of one onset's chord: a string index (0 = lowest) and fret per note, or (-1, -1)."""

    __slots__ = ("assign", "cost", "pos", "top", "mean_string", "mask", "opens")

    def __init__(self, assign: tuple[tuple[int, int], ...], cost: float):
        self.assign = assign
        self.cost = cost
        fretted = [f for s, f in assign if f > 0]
        self.pos = min(fretted) if fretted else math.nan  # hand position = index-finger fret
        self.top = max(fretted) if fretted else math.nan
        played = [s for s, f in assign if s >= 0]
        self.mean_string = sum(played) / len(played) if played else math.nan
        self.mask = sum(1 << s for s in played)
        self.opens = sum(1 for s, f in assign if f == 0)


def _chord_cost(assign, n_strings: int, w: np.ndarray, c: FretCosts) -> float:
    acc = np.zeros(N_FEATURES)
    dropped, span = chord_features(assign, n_strings, acc)
    return float(acc @ w) + c.dropped * dropped + (c.impossible if span > c.max_span else 0.0)


def chord_cands(pitches: Sequence[int], opens: Sequence[int], max_fret: int, cost_fn, beam: int,
                 extra=None) -> list[Cand]:
    """The `beam` cheapest assignments of the chord's notes to distinct strings (plus `extra`, if given)."""
    options = []
    for p in pitches:
        opts = [(s, p - o) for s, o in enumerate(opens) if 0 <= p - o <= max_fret]
        options.append(opts)
    results: list[tuple[float, tuple]] = []

    def search(i: int, used: int, acc: list, allow_drop: bool) -> None:
        if i == len(options):
            results.append((cost_fn(acc), tuple(acc)))
            return
        for s, f in options[i]:
            if not used & (1 << s):
                acc.append((s, f))
                search(i + 1, used | (1 << s), acc, allow_drop)
                acc.pop()
        if allow_drop or not options[i]:
            acc.append(UNPLAYABLE)
            search(i + 1, used, acc, allow_drop)
            acc.pop()

    if len(pitches) <= len(opens):
        search(0, 0, [], False)
    if not results or all(any(s < 0 for s, _ in a) for _, a in results):
        # No full assignment: let any note go unplayed, the fewest possible (each costs `dropped`).
        results.clear()
        if len(pitches) > 8:  # keep the search small: extra notes beyond the highest 8 are dropped
            pitches_kept = len(opens) + 2
            options[pitches_kept:] = [[] for _ in options[pitches_kept:]]
        search(0, 0, [], True)
    results.sort(key=lambda r: r[0])
    kept = results[:beam]
    if extra is not None and all(a != extra for _, a in kept):
        kept.append((cost_fn(list(extra)), extra))
    return [Cand(a, c) for c, a in kept]


# Chord candidates already made, per (cost weights, guitar): a chord's list depends on nothing else, and a folder's
# parts (prepare's worker, eval) play the same chords again and again. Bounded: the oldest guitars' go first.
_CANDS: dict[tuple, dict[tuple[int, ...], list[Cand]]] = {}
_CANDS_GUITARS = 8
_CANDS_CHORDS = 50_000  # per guitar; then that guitar's lists are made afresh


def _known_cands(costs: FretCosts, w: np.ndarray, opens: list[int], fret_room: int) -> dict[tuple[int, ...], list]:
    """The remembered chord candidates of these costs on this guitar (an empty dict the first time)."""
    key = (w.tobytes(), costs.dropped, costs.impossible, costs.max_span, tuple(opens), fret_room)
    known = _CANDS.pop(key, None)
    if known is None or len(known) > _CANDS_CHORDS:
        known = {}
    _CANDS[key] = known  # the newest last
    while len(_CANDS) > _CANDS_GUITARS:
        del _CANDS[next(iter(_CANDS))]
    return known


def candidate_layers(notes_t, groups, tuning, capo, max_fret, costs, gold=None) -> list[list[Cand]]:
    """The cheapest fingerings of each onset's chord (layers of equal chords share one list, kept for later parts:
    `_CANDS`); with `gold`, the human fingering of each chord is among them."""
    n_strings = len(tuning)
    opens = [p + capo for p in tuning]  # index 0 = lowest string
    fret_room = max_fret - capo
    w = costs.vector()
    cache = _known_cands(costs, w, opens, fret_room) if gold is None else {}

    def cost(a) -> float:
        return _chord_cost(a, n_strings, w, costs)

    layers: list[list[Cand]] = []
    for g in groups:
        pitches = tuple(notes_t[i][2] for i in g)
        if gold is not None:
            layers.append(chord_cands(pitches, opens, fret_room, cost, _BEAM, tuple(gold[i] for i in g)))
            continue
        if pitches not in cache:
            cache[pitches] = chord_cands(pitches, opens, fret_room, cost, _BEAM)
        layers.append(cache[pitches])
    return layers
