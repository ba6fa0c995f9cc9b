"""Guitar tab: choose a (string, fret) for every note (Viterbi fingering) and render it as ASCII tab or Guitar Pro 5.

Strings are numbered as in tab: 1 = highest-pitched string .. len(tuning) = lowest. `tuning` lists the
open-string MIDI pitches lowest string first (as in `GuitarScore`). Fret numbers are relative to the
capo: fret 0 is the capo (or the nut without one), so pitch == tuning[len(tuning) - string] + capo + fret.

Unplayable notes get the marker `UNPLAYABLE == (-1, -1)`: a pitch outside the tuning's range, or a
note of a chord that cannot be given a string of its own (more notes than strings, or two notes that
only fit on the same string). Callers rendering tab skip those notes; the MIDI keeps them.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from guitarformer.data.score import MAX_FRET, STANDARD_TUNING

UNPLAYABLE: tuple[int, int] = (-1, -1)

# Every fingering cost is a weight times a feature count, so the weights can be fit on human tabs
# (scripts/bench_fretting.py --fit). Layout of the weight/feature vector:
_N_FRET = 25  # per note: fret 0..24 (higher frets share the last bin)
_N_STRING = 8  # per note: tab string 1..8
_N_SPAN = 7  # per chord: fretted span 0..5, 6+
_MOVE_BIN = (0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 8, 8) + (9,) * 12  # |hand shift| 0..24 frets -> bin
_N_MOVE = 10
_FRET0 = 0
_STRING0 = _FRET0 + _N_FRET
_SPAN0 = _STRING0 + _N_STRING
_GAP = _SPAN0 + _N_SPAN  # per unused string inside a chord's string range
_MOVE0 = _GAP + 1
_MOVE_REST = _MOVE0 + _N_MOVE  # per fret of hand shift (up to 12) when nothing sounds at the onset
_JUMP = _MOVE_REST + 1  # per string the mean string moves
_CONTRARY = _JUMP + 1  # single note to single note: string moves against the pitch direction
_SAME = _CONTRARY + 1  # single note to single note on the same string...
_SLIDE = _SAME + 1  # ...per fret moved along it
_CUT = _SLIDE + 1  # per string re-used while its previous note still sounds
_OPEN5 = _CUT + 1  # per open string while the hand is at fret 5 or above
_OPEN9 = _OPEN5 + 1  # ...and again at fret 9 or above
_SP_BIN = (0,) + (1,) * 4 + (2,) * 4 + (3,) * 4 + (4,) * 12  # fret 0..24 -> open, 1-4, 5-8, 9-12, 13+
_N_SP = 5
_SP0 = _OPEN9 + 1  # per note, by (tab string, fret bin): which region of the neck a string is played in
N_FEATURES = _SP0 + _N_STRING * _N_SP

# Fit by an averaged structured perceptron on one half of the shared GP + classtab files (split by file
# name hash); docs/FRETTING.md gives the held-out accuracy on the other half. Rounded to 3 decimals.
_FITTED = (
    # fret 0..24
    -0.606, -0.583, -0.439, -0.235, 0.285, -0.081, 0.035, 0.38, 0.482, 0.184, 0.625, 1.107, 1.356,
    1.712, 1.965, 1.989, 2.254, 3.071, 3.961, 4.423, 3.507, 5.89, 2.814, 5.618, 5.884,
    # tab string 1..8
    -0.308, -0.368, -0.431, -0.379, -0.055, 0.919, 0.622, 0,
    # span 0..5, 6+
    1.484, 1.858, 2.243, 3.365, 5.408, 7.568, -18.127,
    0.308,  # string gap
    # hand shift bins 0, 1, 2, 3, 4, 5, 6, 7-8, 9-12, 13+
    -0.555, -0.479, -0.251, 0.493, 1.307, 1.916, 3.009, 3.807, 5.396, 6.592,
    0.331,  # shift after a rest
    0.231,  # string jump
    1.076,  # contrary
    -2.141,  # same string
    1.48,  # slide
    0.038,  # cut sustain
    0.387,  # open at 5+
    0.589,  # open at 9+
    # tab string 1..8 x fret open, 1-4, 5-8, 9-12, 13+
    -0.712, -0.446, -0.069, 0.115, 0.804,
    0.367, -0.305, -0.686, -0.125, 0.381,
    0.248, -0.129, 0.074, -0.529, -0.095,
    0.099, -0.23, 0.091, 0.047, -0.385,
    -0.541, -0.566, -0.291, -0.175, 1.518,
    -0.066, -0.296, -1.126, -0.436, 2.843,
    0, 0, 0.225, 0.174, 0.223,
    0, 0, 0, 0, 0,
)


@dataclass(frozen=True)
class FretCosts:
    """Weights of the fingering cost (each multiplies a feature count; see `fingering_features`).

    Defaults are fit on human tabs (scripts/bench_fretting.py --fit, docs/FRETTING.md)."""

    fret: tuple[float, ...] = _FITTED[_FRET0:_STRING0]  # per note, by fret 0..24
    string: tuple[float, ...] = _FITTED[_STRING0:_SPAN0]  # per note, by tab string 1..8
    span: tuple[float, ...] = _FITTED[_SPAN0:_GAP]  # per chord, by span of its fretted notes 0..5, 6+
    string_gap: float = _FITTED[_GAP]
    move: tuple[float, ...] = _FITTED[_MOVE0:_MOVE_REST]  # per onset, by hand shift bin (see _MOVE_BIN)
    move_after_rest: float = _FITTED[_MOVE_REST]
    string_jump: float = _FITTED[_JUMP]
    contrary: float = _FITTED[_CONTRARY]
    same_string: float = _FITTED[_SAME]
    slide: float = _FITTED[_SLIDE]
    cut_sustain: float = _FITTED[_CUT]
    open_at_5: float = _FITTED[_OPEN5]
    open_at_9: float = _FITTED[_OPEN9]
    string_region: tuple[float, ...] = _FITTED[_SP0:]  # per note, by (tab string 1..8, fret 0, 1-4, 5-8, 9-12, 13+)
    max_span: int = 5  # fixed, not fit: spans beyond this cost `impossible` (still allowed if nothing else fits)
    impossible: float = 50.0
    dropped: float = 1000.0  # per chord note left without a string

    def vector(self) -> np.ndarray:
        """The fitted weights as one vector in `fingering_features` order."""
        w = [*self.fret, *self.string, *self.span, self.string_gap, *self.move, self.move_after_rest, self.string_jump,
             self.contrary, self.same_string, self.slide, self.cut_sustain, self.open_at_5, self.open_at_9, *self.string_region]
        if len(w) != N_FEATURES:
            raise ValueError(f"FretCosts has {len(w)} weights, expected {N_FEATURES}")
        return np.asarray(w, dtype=float)

    @classmethod
    def from_vector(cls, w: Sequence[float], **fixed: Any) -> "FretCosts":
        w = [float(x) for x in w]
        if len(w) != N_FEATURES:
            raise ValueError(f"{len(w)} weights, expected {N_FEATURES}")
        return cls(
            fret=tuple(w[_FRET0:_STRING0]), string=tuple(w[_STRING0:_SPAN0]), span=tuple(w[_SPAN0:_GAP]),
            string_gap=w[_GAP], move=tuple(w[_MOVE0:_MOVE_REST]), move_after_rest=w[_MOVE_REST],
            string_jump=w[_JUMP], contrary=w[_CONTRARY], same_string=w[_SAME], slide=w[_SLIDE], cut_sustain=w[_CUT],
            open_at_5=w[_OPEN5], open_at_9=w[_OPEN9], string_region=tuple(w[_SP0:]), **fixed,
        )


DEFAULT_COSTS = FretCosts()
_BEAM = 16  # fingerings kept per onset (by chord cost) before the Viterbi pass


def _note_tuple(n: Any) -> tuple[int, int, int]:
    if hasattr(n, "pitch"):
        return int(n.time), int(n.duration), int(n.pitch)
    onset, duration, pitch = n
    return int(onset), int(duration), int(pitch)


def _group_onsets(notes: Sequence[tuple[int, int, int]]) -> list[list[int]]:
    """Indices of the notes, grouped by onset, in time order."""
    order = sorted(range(len(notes)), key=lambda i: (notes[i][0], -notes[i][2]))
    groups: list[list[int]] = []
    last = None
    for i in order:
        if notes[i][0] != last:
            groups.append([])
            last = notes[i][0]
        groups[-1].append(i)
    return groups


def _chord_features(assign: Sequence[tuple[int, int]], n_strings: int, acc: np.ndarray) -> tuple[int, int]:
    """Add one chord's features to `acc`; return (dropped notes, 1 if the span is beyond reach else 0) for the fixed costs."""
    played = [(s, f) for s, f in assign if s >= 0]
    fretted = [f for _, f in played if f > 0]
    for s, f in played:
        acc[_FRET0 + min(f, _N_FRET - 1)] += 1
        acc[_STRING0 + min(n_strings - s, _N_STRING) - 1] += 1
        acc[_SP0 + (min(n_strings - s, _N_STRING) - 1) * _N_SP + _SP_BIN[min(f, 24)]] += 1
    span = max(fretted) - min(fretted) if fretted else 0
    if fretted:
        acc[_SPAN0 + min(span, _N_SPAN - 1)] += 1
    if len(played) > 1:
        strings = [s for s, _ in played]
        acc[_GAP] += max(strings) - min(strings) + 1 - len(played)
    return len(assign) - len(played), span


class _Cand:
    """One fingering of one onset's chord: a string index (0 = lowest) and fret per note, or (-1, -1)."""

    __slots__ = ("assign", "cost", "pos", "mean_string", "mask", "opens")

    def __init__(self, assign: tuple[tuple[int, int], ...], cost: float):
        self.assign = assign
        self.cost = cost
        fretted = [f for s, f in assign if f > 0]
        self.pos = min(fretted) if fretted else math.nan  # hand position = index-finger fret
        played = [s for s, f in assign if s >= 0]
        self.mean_string = sum(played) / len(played) if played else math.nan
        self.mask = sum(1 << s for s in played)
        self.opens = sum(1 for s, f in assign if f == 0)


def _chord_cost(assign, n_strings: int, w: np.ndarray, c: FretCosts) -> float:
    acc = np.zeros(N_FEATURES)
    dropped, span = _chord_features(assign, n_strings, acc)
    return float(acc @ w) + c.dropped * dropped + (c.impossible if span > c.max_span else 0.0)


def _chord_cands(pitches: Sequence[int], opens: Sequence[int], max_fret: int, cost_fn, beam: int, extra=None) -> list[_Cand]:
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
    return [_Cand(a, c) for c, a in kept]


def _shift_tables(c: FretCosts) -> tuple[np.ndarray, np.ndarray]:
    """Cost of a hand shift by 0..24 frets (index 25 = no shift known: free), without and with a rest before it."""
    move = np.array([c.move[b] for b in _MOVE_BIN] + [0.0])
    rest = move + c.move_after_rest * np.minimum(np.arange(len(move)), 12)
    rest[-1] = 0.0
    return move, rest


def _decode(notes_t, tuning, capo, max_fret, costs, gold=None):
    """Viterbi over onsets. Returns (groups, chosen candidate per group). `gold` (one (string index, fret) per
    note) is added to each onset's candidates, for fitting."""
    n_strings = len(tuning)
    opens = [p + capo for p in tuning]  # index 0 = lowest string
    fret_room = max_fret - capo
    groups = _group_onsets(notes_t)
    w = costs.vector()
    cache: dict[tuple[int, ...], list[_Cand]] = {}
    layers: list[list[_Cand]] = []
    for g in groups:
        pitches = tuple(notes_t[i][2] for i in g)
        if gold is not None:
            layers.append(_chord_cands(pitches, opens, fret_room, lambda a: _chord_cost(a, n_strings, w, costs), _BEAM,
                                       tuple(gold[i] for i in g)))
        else:
            if pitches not in cache:
                cache[pitches] = _chord_cands(pitches, opens, fret_room, lambda a: _chord_cost(a, n_strings, w, costs), _BEAM)
            layers.append(cache[pitches])
    if not layers:
        return groups, []

    move_tab, rest_tab = _shift_tables(costs)
    popcount = np.array([bin(i).count("1") for i in range(1 << n_strings)])

    def arrays(layer):
        return (np.array([x.pos for x in layer]), np.array([x.mean_string for x in layer]),
                np.array([x.cost for x in layer]), np.array([x.opens for x in layer]),
                np.array([x.mask for x in layer]), np.array([x.assign[0] for x in layer]))

    # Viterbi: best[j] = cheapest total cost ending in candidate j of the current layer. `hand[j]` carries the
    # last fretted position along that path, so open strings do not make the hand forget where it was.
    prev = arrays(layers[0])
    best = prev[2].copy()
    hand = prev[0]
    back: list[np.ndarray] = []
    for t in range(1, len(layers)):
        prev_g, g = groups[t - 1], groups[t]
        onset = notes_t[g[0]][0]
        cur = arrays(layers[t])
        pos_c, ms_c, cost_c, opens_c, mask_c, first_c = cur
        ends = [notes_t[i][0] + notes_t[i][1] for i in prev_g]
        d = np.abs(hand[:, None] - pos_c[None, :])
        d = np.where(np.isnan(d), 25, np.minimum(d, 24)).astype(np.intp)
        total = best[:, None] + (rest_tab if max(ends) < onset else move_tab)[d]
        if costs.string_jump:
            jump = np.abs(prev[1][:, None] - ms_c[None, :])
            total += costs.string_jump * np.nan_to_num(jump)
        if len(prev_g) == 1 and len(g) == 1:
            pa, pb = notes_t[prev_g[0]][2], notes_t[g[0]][2]
            sa, fa = prev[5][:, 0], prev[5][:, 1]
            sb, fb = first_c[:, 0], first_c[:, 1]
            ok = (sa >= 0)[:, None] & (sb >= 0)[None, :]
            ds = sb[None, :] - sa[:, None]
            same = ok & (ds == 0)
            total += costs.contrary * (ok & (ds * (pb - pa) < 0))
            total += same * (costs.same_string + costs.slide * np.abs(fb[None, :] - fa[:, None]))
        if costs.cut_sustain:
            sus = [k for k, e in enumerate(ends) if e > onset]
            if sus:
                sus_mask = np.array([sum(1 << x.assign[k][0] for k in sus if x.assign[k][0] >= 0) for x in layers[t - 1]])
                total += costs.cut_sustain * popcount[sus_mask[:, None] & mask_c[None, :]]
        if opens_c.any():
            h = np.where(np.isnan(pos_c)[None, :], hand[:, None], pos_c[None, :])
            with np.errstate(invalid="ignore"):
                total += opens_c[None, :] * (costs.open_at_5 * (h >= 5) + costs.open_at_9 * (h >= 9))
        ptr = total.argmin(axis=0)
        best = total[ptr, np.arange(len(ptr))] + cost_c
        hand = np.where(np.isnan(pos_c), hand[ptr], pos_c)
        back.append(ptr)
        prev = cur

    j = int(best.argmin())
    chosen = [None] * len(layers)
    for t in range(len(layers) - 1, -1, -1):
        chosen[t] = layers[t][j]
        if t > 0:
            j = int(back[t - 1][j])
    return groups, chosen


def fret(
    notes: Iterable[Any],
    tuning: Sequence[int] = STANDARD_TUNING,
    capo: int = 0,
    max_fret: int = MAX_FRET,
    costs: FretCosts = DEFAULT_COSTS,
) -> list[tuple[int, int]]:
    """One (string, fret) per note, in input order, minimising the fitted fingering cost (hand shifts, stretch,
    position height, string choice; see `fingering_features`).

    `notes`: (onset_tick, duration_tick, pitch) tuples or objects with .time/.duration/.pitch (symusic notes).
    Notes with the same onset form a chord and get distinct strings. Returns `UNPLAYABLE` (-1, -1) for a
    note that cannot be played (see the module docstring). Frets are relative to the capo.
    """
    notes_t = [_note_tuple(n) for n in notes]
    groups, chosen = _decode(notes_t, tuning, capo, max_fret, costs)
    n_strings = len(tuning)
    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes_t)
    for g, cand in zip(groups, chosen):
        for k, i in enumerate(g):
            s, f = cand.assign[k]
            out[i] = UNPLAYABLE if s < 0 else (n_strings - s, f)
    return out


def fingering_features(
    notes: Iterable[Any], frets: Sequence[tuple[int, int]], tuning: Sequence[int] = STANDARD_TUNING
) -> np.ndarray:
    """Feature counts of one fingering (`frets`: (string, fret) per note, as `fret()` returns) such that `fret()`
    minimises `FretCosts.vector() @ fingering_features(...)` (plus the fixed `dropped`/`impossible` costs).
    The reference the fast Viterbi is tested against, and what fitting the weights uses."""
    notes_t = [_note_tuple(n) for n in notes]
    n_strings = len(tuning)
    acc = np.zeros(N_FEATURES)
    hand = None
    prev = None  # (group, assign, mean string)
    for g in _group_onsets(notes_t):
        assign = tuple(UNPLAYABLE if frets[i][0] < 0 else (n_strings - frets[i][0], frets[i][1]) for i in g)
        _chord_features(assign, n_strings, acc)
        played = [(s, f) for s, f in assign if s >= 0]
        fretted = [f for _, f in played if f > 0]
        pos = min(fretted) if fretted else None
        ms = sum(s for s, _ in played) / len(played) if played else None
        onset = notes_t[g[0]][0]
        if prev is not None:
            pg, pa, pms = prev
            ends = [notes_t[i][0] + notes_t[i][1] for i in pg]
            if hand is not None and pos is not None:
                d = min(abs(hand - pos), 24)
                acc[_MOVE0 + _MOVE_BIN[d]] += 1
                if max(ends) < onset:
                    acc[_MOVE_REST] += min(d, 12)
            if pms is not None and ms is not None:
                acc[_JUMP] += abs(pms - ms)
            if len(pg) == 1 and len(g) == 1 and pa[0][0] >= 0 and assign[0][0] >= 0:
                ds = assign[0][0] - pa[0][0]
                if ds * (notes_t[g[0]][2] - notes_t[pg[0]][2]) < 0:
                    acc[_CONTRARY] += 1
                if ds == 0:
                    acc[_SAME] += 1
                    acc[_SLIDE] += abs(assign[0][1] - pa[0][1])
            used = {s for s, _ in played}
            acc[_CUT] += sum(1 for k, e in enumerate(ends) if e > onset and pa[k][0] >= 0 and pa[k][0] in used)
            h = pos if pos is not None else hand
            if h is not None:
                n_open = sum(1 for _, f in played if f == 0)
                acc[_OPEN5] += n_open * (h >= 5)
                acc[_OPEN9] += n_open * (h >= 9)
        if pos is not None:
            hand = pos
        prev = (g, assign, ms)
    return acc


def fret_lowest(
    notes: Iterable[Any], tuning: Sequence[int] = STANDARD_TUNING, capo: int = 0, max_fret: int = MAX_FRET
) -> list[tuple[int, int]]:
    """Baseline: each chord gets the distinct-string assignment with the smallest sum of frets (lowest-fret rule)."""
    notes_t = [_note_tuple(n) for n in notes]
    n_strings = len(tuning)
    opens = [p + capo for p in tuning]
    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes_t)

    def cost(a):
        return sum(1000 if s < 0 else f for s, f in a)

    for g in _group_onsets(notes_t):
        st = _chord_cands([notes_t[i][2] for i in g], opens, max_fret - capo, cost, 1)[0]
        for k, i in enumerate(g):
            s, f = st.assign[k]
            out[i] = UNPLAYABLE if s < 0 else (n_strings - s, f)
    return out


# ---------------------------------------------------------------------------------------------------
# Rendering

_PITCH_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
_GRIDS = (1, 2, 4, 8)  # tab columns per quarter note, coarsest first


def string_labels(tuning: Sequence[int]) -> list[str]:
    """Tab line labels, highest string first: standard tuning gives e B G D A E."""
    names = [_PITCH_NAMES[p % 12] for p in tuning]
    if len(names) > 1 and names[-1] == names[0]:
        names[-1] = names[-1].lower()  # the usual 'e' for the high E string
    return names[::-1]


def _bars(score, end: int) -> list[tuple[int, int]]:
    """(start, length) in ticks of every bar up to `end`, from the score's time signatures (4/4 without)."""
    tpq = score.ticks_per_quarter
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures) or [(0, 4, 4)]
    if sigs[0][0] > 0:
        sigs.insert(0, (0, 4, 4))
    bars, t, k = [], 0, 0
    while t < end or not bars:
        while k + 1 < len(sigs) and sigs[k + 1][0] <= t:
            k += 1
        length = max(1, sigs[k][1] * tpq * 4 // sigs[k][2])
        bars.append((t, length))
        t += length
    return bars


def _resolve_frets(gs, frets) -> list[tuple[int, int]]:
    if frets is None:
        frets = gs.frets
    if frets is None:
        frets = fret(gs.track.notes, gs.tuning, gs.capo)
    if len(frets) != len(gs.track.notes):
        raise ValueError(f"{len(frets)} frets for {len(gs.track.notes)} notes")
    return list(frets)


def render_ascii_tab(gs, frets=None, width: int = 80) -> str:
    """The part as a plain-text tab: one line per string (labels from the tuning), bar lines from the time
    signatures, one column per grid step (the coarsest of 1/4..1/32 that holds the onsets), wrapped at `width`.
    `frets` defaults to gs.frets, else to `fret()`; unplayable notes are left out."""
    frets = _resolve_frets(gs, frets)
    notes = gs.track.notes
    tpq = gs.score.ticks_per_quarter
    n = len(gs.tuning)
    onsets = [int(x.time) for x in notes]
    per_q = next((g for g in _GRIDS if all((t * g) % tpq == 0 for t in onsets)), _GRIDS[-1])
    step = tpq / per_q  # ticks per column slot
    end = max((x.time + 1 for x in notes), default=1)
    bars = _bars(gs.score, end)

    # cells[bar][slot][string_index 0 = highest] = fret text
    cells: list[dict[int, dict[int, str]]] = [dict() for _ in bars]
    starts = [b[0] for b in bars]
    for x, (s, f) in zip(notes, frets):
        if f < 0 or not 1 <= s <= n:
            continue
        b = bisect.bisect_right(starts, x.time) - 1
        slot = round((x.time - starts[b]) / step)
        col = cells[b].setdefault(slot, {})
        while (s - 1) in col:  # two onsets rounded to one slot: push the later one right
            slot += 1
            col = cells[b].setdefault(slot, {})
        col[s - 1] = str(f)

    # Every slot is equally wide (one dash more than the widest fret) so column position is time.
    w = 1 + max((len(t) for bar in cells for col in bar.values() for t in col.values()), default=1)

    def bar_text(b: int) -> list[str]:
        n_slots = max(1, round(bars[b][1] / step), max(cells[b], default=0) + 1)
        lines = [["-"] for _ in range(n)]
        for slot in range(n_slots):
            col = cells[b].get(slot, {})
            for i in range(n):
                t = col.get(i, "")
                lines[i].append(t + "-" * (w - len(t)))
        return ["".join(x) for x in lines]

    labels = string_labels(gs.tuning)
    lw = max(len(x) for x in labels)
    header = []
    if gs.name:
        header.append(gs.name)
    header.append("Tuning: " + " ".join(labels[::-1]))
    if gs.capo:
        header.append(f"Capo: {gs.capo}")
    qpm = gs.score.tempos[0].qpm if len(gs.score.tempos) else 120.0
    header.append(f"Tempo: {qpm:g}   (one tab column = 1/{per_q * 4} note)")

    staves, cur = [], [""] * n
    for b in range(len(bars)):
        bt = bar_text(b)
        if cur[0] and lw + 1 + len(cur[0]) + len(bt[0]) + 1 > width:
            staves.append(cur)
            cur = [""] * n
        cur = [c + t + "|" for c, t in zip(cur, bt)]
    staves.append(cur)
    out = header + [""]
    for st in staves:
        out += [f"{labels[i]:<{lw}}|{st[i]}" for i in range(n)] + [""]
    return "\n".join(out)


def write_ascii_tab(gs, path, frets=None, width: int = 80) -> None:
    """Write `render_ascii_tab(gs)` to `path`."""
    from pathlib import Path

    Path(path).write_text(render_ascii_tab(gs, frets, width), encoding="utf-8")


# Guitar Pro durations (ticks at 960 per quarter), longest first: (ticks, value, dotted).
_GP_Q = 960
_GP_DURATIONS = [
    (int(_GP_Q * 4 / v * (1.5 if d else 1)), v, d) for v in (1, 2, 4, 8, 16, 32, 64) for d in (True, False)
]
_GP_DURATIONS.sort(key=lambda x: -x[0])
_GP_GRID = _GP_Q // 16  # a 64th note: onsets are quantised to it


def _split_duration(ticks: int) -> list[tuple[int, int, bool]]:
    """Greedy decomposition of a gap into Guitar Pro durations (value, dotted)."""
    out = []
    while ticks >= _GP_GRID:
        t, v, d = next(x for x in _GP_DURATIONS if x[0] <= ticks)
        out.append((t, v, d))
        ticks -= t
    return out


def write_gp5(gs, path, frets=None) -> None:
    """Write the part as a one-track Guitar Pro 5 file (tuning, capo, tempo, time signatures, string/fret).

    Onsets are quantised to 64th notes; each onset is a beat lasting until the next onset (or the bar
    end), split into Guitar Pro durations with rests, so held notes that overlap later onsets are
    shortened. Unplayable notes and a second note on an already used string at one onset are left out.
    """
    import guitarpro as gp

    frets = _resolve_frets(gs, frets)
    notes = gs.track.notes
    tpq = gs.score.ticks_per_quarter
    n_str = len(gs.tuning)

    def q(t: int) -> int:
        return round(t * _GP_Q / tpq / _GP_GRID) * _GP_GRID

    end_src = max((x.time + x.duration for x in notes), default=1)
    bars = _bars(gs.score, end_src)

    song = gp.models.Song()
    song.title = gs.name or ""
    song.tempo = int(round(gs.score.tempos[0].qpm)) if len(gs.score.tempos) else 120
    track = song.tracks[0]
    track.name = (gs.name or "Guitar")[:40]
    track.strings = [gp.models.GuitarString(i + 1, p) for i, p in enumerate(reversed(gs.tuning))]
    track.offset = gs.capo
    track.fretCount = MAX_FRET
    track.channel.instrument = int(gs.track.program) if not gs.track.is_drum else 25
    song.measureHeaders.clear()
    track.measures.clear()

    # Time signature per bar, from the source.
    ts_list = sorted((ts.time, ts.numerator, ts.denominator) for ts in gs.score.time_signatures) or [(0, 4, 4)]
    by_onset: dict[int, list[tuple[int, int, int]]] = {}
    for x, (s, f) in zip(notes, frets):
        if f >= 0 and 1 <= s <= n_str:
            by_onset.setdefault(q(x.time), []).append((s, f, int(x.velocity)))

    gp_start = _GP_Q  # GP's first measure starts at one quarter
    for k, (start, length) in enumerate(bars):
        num, den = 4, 4
        for t, nu, de in ts_list:
            if t <= start:
                num, den = nu, de
        header = gp.models.MeasureHeader(number=k + 1, start=gp_start)
        header.timeSignature.numerator = num
        header.timeSignature.denominator = gp.models.Duration(value=den)
        header.song = song
        song.measureHeaders.append(header)
        measure = gp.models.Measure(track, header)
        track.measures.append(measure)
        voice = measure.voices[0]

        b0, b1 = q(start), q(start) + header.length
        onsets = sorted(t for t in by_onset if b0 <= t < b1)
        points = onsets + [b1]
        if not onsets or onsets[0] > b0:
            points = [b0] + points  # leading rest
        for i in range(len(points) - 1):
            t, nxt = points[i], points[i + 1]
            parts = _split_duration(nxt - t)
            for j, (_, v, d) in enumerate(parts):
                beat = gp.models.Beat(voice, duration=gp.models.Duration(value=v, isDotted=d))
                if j == 0 and t in by_onset:
                    used = set()
                    for s, f, vel in by_onset[t]:
                        if s in used:
                            continue
                        used.add(s)
                        beat.notes.append(gp.models.Note(beat, value=f, string=s, velocity=vel, type=gp.NoteType.normal))
                    beat.status = gp.models.BeatStatus.normal
                else:
                    beat.status = gp.models.BeatStatus.rest
                voice.beats.append(beat)
        gp_start += header.length
    gp.write(song, str(path), version=(5, 1, 0))
