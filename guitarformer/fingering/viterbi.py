"""Fingering: choose a (string, fret) for every note by a two-pass Viterbi over onsets (costs.py, string_model.py).

Strings are numbered as in tab: 1 = highest-pitched string .. len(tuning) = lowest. `tuning` lists the
open-string MIDI pitches lowest string first (as in `GuitarScore`). Fret numbers are relative to the
capo: fret 0 is the capo (or the nut without one), so pitch == tuning[len(tuning) - string] + capo + fret.

Unplayable notes get the marker `UNPLAYABLE == (-1, -1)`: a pitch outside the tuning's range, or a
note of a chord that cannot be given a string of its own (more notes than strings, or two notes that
only fit on the same string). Callers rendering tab skip those notes; the MIDI keeps them.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from guitarformer.fingering.costs import (
    CONTRARY,
    CUT,
    JUMP,
    MOVE0,
    MOVE_BIN,
    MOVE_REST,
    N_FROM_FIRST,
    N_PIECE,
    N_SP,
    OPEN5,
    OPEN9,
    P_REACH,
    PIECE0,
    REACH_BANDS,
    SAME,
    SLIDE,
    SP_BIN,
    WIN0,
    WIN_BIN,
    DEFAULT_COSTS,
    N_FEATURES,
    FretCosts,
    costs_for_program,
)
from guitarformer.fingering.chords import Cand, candidate_layers, chord_cands, chord_features
from guitarformer.fingering.notes import UNPLAYABLE, group_onsets, note_tuple
from guitarformer.music.guitar import MAX_FRET, STANDARD_TUNING

def _window_move(h, lo, hi):
    """Lazy hand window: (new index-finger fret, frets moved) for a hand at `h` meeting fretted notes lo..hi
    (NaN h: no hand yet; NaN lo: nothing fretted). Works elementwise on numpy arrays. The hand goes down to lo
    where lo < h, up to hi - 3 (but not past lo) where hi > h + 3, else stays: min(max(h, hi - 3), lo)."""
    new = np.minimum(np.maximum(h, hi - 3), lo)
    new = np.where(np.isnan(h), lo, new)
    new = np.where(np.isnan(lo), h, new)
    return new, np.abs(new - h)


def _shift_tables(c: FretCosts) -> tuple[np.ndarray, np.ndarray]:
    """Cost of a hand shift by 0..24 frets (index 25 = no shift known: free), without and with a rest before it."""
    move = np.array([c.move[b] for b in MOVE_BIN] + [0.0])
    rest = move + c.move_after_rest * np.minimum(np.arange(len(move)), 12)
    rest[-1] = 0.0
    return move, rest


def _piece_table(notes_t, tuning, capo, max_fret, first) -> np.ndarray:
    """Piece-level features of every (note, string index 0 = lowest): (notes, strings, N_PIECE) counts/shares,
    from `first` ((string, fret) per note, a first-pass fingering). Each note's own first-pass choice is left
    out of its shares (leave-one-out), so a note seen once in a part gets no piece signal. `first` None: only
    the pitch-only features (what the first pass itself uses), the first-pass columns are 0."""
    n = len(tuning)
    n_notes = len(notes_t)
    out = np.zeros((n_notes, n, N_PIECE))
    if n_notes == 0:
        return out
    opens = np.array([p + capo for p in tuning])
    pitch = np.array([x[2] for x in notes_t])
    own = np.array([n - s if s >= 0 else -1 for s, _ in first]) if first is not None else np.full(n_notes, -1)
    frets = pitch[:, None] - opens[None, :]
    ok = (frets >= 0) & (frets <= max_fret - capo)
    bins = np.array(SP_BIN)[np.clip(frets, 0, 24)]
    groups = group_onsets(notes_t)
    onset_of = np.empty(n_notes, dtype=np.intp)
    for t, g in enumerate(groups):
        onset_of[g] = t
    top = [notes_t[g[0]][2] for g in groups]  # highest pitch per onset
    prev_top = [-1] + top[:-1]
    next_top = top[1:] + [-1]
    played = own >= 0
    own_c = np.where(played, own, 0)

    def shares(keys) -> np.ndarray:
        """Per note and string: share of the OTHER first-pass-played notes with the same key on that string."""
        ids: dict = {}
        kid = np.array([ids.setdefault(k, len(ids)) for k in keys])
        counts = np.zeros((len(ids), n))
        np.add.at(counts, (kid[played], own[played]), 1)
        c = counts[kid]
        c[np.flatnonzero(played), own[played]] -= 1
        tot = c.sum(1, keepdims=True)
        return np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)

    keys1 = pitch.tolist()
    if first is not None:
        out[:, :, 0] = shares(keys1)
        out[:, :, 1] = shares([(p, prev_top[onset_of[i]]) for i, p in enumerate(keys1)])
        out[:, :, 2] = shares([(p, prev_top[onset_of[i]], next_top[onset_of[i]]) for i, p in enumerate(keys1)])
    order = [i for g in groups for i in g]
    last: dict[int, int] = {}
    for i in order:  # previous note of the same pitch
        if keys1[i] in last and last[keys1[i]] >= 0:
            out[i, last[keys1[i]], 3] = 1.0
        last[keys1[i]] = own[i]
    last = {}
    for i in reversed(order):
        if keys1[i] in last and last[keys1[i]] >= 0:
            out[i, last[keys1[i]], 4] = 1.0
        last[keys1[i]] = own[i]
    # Fret regions pass 1 played in: the whole part, and 8 onsets either side (own onset left out).
    own_bin = np.where(played, bins[np.arange(n_notes), own_c], -1)
    hist = np.array([(own_bin == b).sum() for b in range(N_SP)], dtype=float)
    loo = hist[None, :] - (own_bin[:, None] == np.arange(N_SP)[None, :])
    tot = loo.sum(1, keepdims=True)
    region = np.divide(loo, tot, out=np.zeros_like(loo), where=tot > 0)
    out[:, :, 5] = np.take_along_axis(region, bins, axis=1)
    per_onset = np.zeros((len(groups) + 1, N_SP))
    np.add.at(per_onset, (onset_of[played] + 1, own_bin[played]), 1)
    cum = per_onset.cumsum(0)
    lo = np.clip(onset_of - 8, 0, len(groups))
    hi = np.clip(onset_of + 9, 0, len(groups))
    win = cum[hi] - cum[lo] - per_onset[onset_of + 1]
    tot = win.sum(1, keepdims=True)
    local = np.divide(win, tot, out=np.zeros_like(win), where=tot > 0)
    out[:, :, 6] = np.take_along_axis(local, bins, axis=1)
    top_arr = np.array(top)
    n_on = len(groups)
    reach = np.array([top_arr[max(0, t - 6): t + 7].max() for t in range(n_on)])
    band = np.searchsorted(np.array(REACH_BANDS), reach, side="right")[onset_of]  # per note
    cols = P_REACH - PIECE0 + band[:, None] * N_SP + bins  # (notes, strings)
    np.put_along_axis(out.reshape(n_notes * n, N_PIECE), cols.reshape(-1, 1), 1.0, axis=1)
    out[~ok] = 0.0
    return out


def _nn_model(costs: FretCosts):
    """The learned string model when `costs` weighs it (nn_weight != 0) and its weights file loads, else None."""
    if not costs.nn_weight:
        return None
    from guitarformer.fingering import string_model  # torch: imported only where fret() runs the model

    return string_model.load()


def _nn_costs(notes_t, tuning, capo, max_fret, costs, model) -> np.ndarray | None:
    """costs.nn_weight * -log p(string) per (note, string index; last column: unplayable), or None (no model)."""
    if model is None or not notes_t:
        return None
    from guitarformer.fingering import string_model

    c = string_model.string_costs(notes_t, tuning, capo, max_fret, model=model)
    return None if c is None else costs.nn_weight * c


class _LayerTables:
    """Each layer's candidates as arrays (position, mean string, cost, open strings, string mask, first note's
    assignment, top fret), with the per-note extra costs (second pass, learned string model) added to the cost."""

    def __init__(self, notes_t, groups, layers, n_strings: int, costs, piece=None, nn=None):
        self.groups, self.layers = groups, layers
        self.extra = None
        if piece is not None and len(notes_t):
            self.extra = np.zeros((len(notes_t), n_strings + 1))  # last column: unplayable (index -1)
            self.extra[:, :n_strings] = piece @ np.asarray(costs.piece, dtype=float)
        if nn is not None and len(notes_t):
            self.extra = nn if self.extra is None else self.extra + nn
        self.static: dict[int, tuple] = {}  # per distinct candidate list (layers of equal chords share one)

    def __call__(self, t: int) -> tuple:
        layer = self.layers[t]
        key = id(layer)
        if key not in self.static:
            self.static[key] = (np.array([x.pos for x in layer]), np.array([x.mean_string for x in layer]),
                                np.array([x.cost for x in layer]), np.array([x.opens for x in layer]),
                                np.array([x.mask for x in layer]), np.array([x.assign[0] for x in layer]),
                                np.array([x.top for x in layer]),
                                np.array([[s for s, _ in x.assign] for x in layer], dtype=np.intp))
        pos, ms, cost, opens, mask, first, top, strings = self.static[key]
        if self.extra is not None:
            cost = cost + self.extra[np.asarray(self.groups[t])[None, :], strings].sum(1)
        return pos, ms, cost, opens, mask, first, top


def _pair_terms(notes_t, costs, prev_g, g, prev, cur) -> tuple[np.ndarray | None, ...]:
    """The terms of a transition between two onsets' candidates that depend on the two candidate lists alone (so are
    the same wherever the same two chords follow each other): the mean string's jump, and from one single note to
    another the contrary-motion and same-string costs. None: a term that does not apply."""
    ms_c, first_c = cur[1], cur[5]
    jump = None
    if costs.string_jump:
        jump = np.abs(prev[1][:, None] - ms_c[None, :])
        jump = costs.string_jump * np.where(np.isnan(jump), 0.0, jump)
    contrary = same_cost = None
    if len(prev_g) == 1 and len(g) == 1:
        pa, pb = notes_t[prev_g[0]][2], notes_t[g[0]][2]
        sa, fa = prev[5][:, 0], prev[5][:, 1]
        sb, fb = first_c[:, 0], first_c[:, 1]
        ok = (sa >= 0)[:, None] & (sb >= 0)[None, :]
        ds = sb[None, :] - sa[:, None]
        same = ok & (ds == 0)
        contrary = costs.contrary * (ok & (ds * (pb - pa) < 0))
        same_cost = same * (costs.same_string + costs.slide * np.abs(fb[None, :] - fa[:, None]))
    return jump, contrary, same_cost


class _HandRows(NamedTuple):
    """One candidate list's `_HandTables`: each table (rows, candidates), indexed by a path's hand or window row."""

    move: np.ndarray  # the hand's shift to each candidate
    rest: np.ndarray  # ... after a rest
    opens: np.ndarray | None  # open strings with the hand at the 5th/9th fret (None: the list has none)
    window: np.ndarray | None  # the window's move (None: its weights are 0)
    new_win: np.ndarray  # the row of the window each candidate leaves
    pos: np.ndarray  # (candidates,) each candidate's position row (0: nothing fretted)


class _HandTables:
    """Per candidate list, what the path-dependent terms of a transition cost for every hand and hand window a path
    can hold (none yet, or frets 1..`fret_room`: table rows 0..fret_room), made once: the hand's shift (after a rest
    and not), open strings with the hand at the 5th/9th fret, the window's move and where it leaves the window. A
    transition reads rows of them instead of computing them (the same numbers, made by the same ops), and a path
    carries its hand and window as those rows."""

    def __init__(self, costs: FretCosts, tabs, fret_room: int):
        self.costs, self.tabs = costs, tabs
        self.hs = np.array([math.nan, *range(1, fret_room + 1)], dtype=float)[:, None]  # row r: fret r; row 0: none
        self.known: dict[int, _HandRows] = {}

    def __call__(self, layer: list[Cand], cur: tuple) -> _HandRows:
        """The tables of `layer` (`cur`: its `_LayerTables` arrays)."""
        key = id(layer)
        if key not in self.known:
            self.known[key] = self._make(cur)
        return self.known[key]

    def _make(self, cur: tuple) -> _HandRows:
        move_tab, rest_tab, _, win_tab = self.tabs
        hs, costs = self.hs, self.costs
        pos_c, _, _, opens_c, _, _, top_c = cur
        d = np.abs(hs - pos_c[None, :])
        d = np.where(np.isnan(d), 25, np.minimum(d, 24)).astype(np.intp)
        opens = None
        if opens_c.any():
            h = np.where(np.isnan(pos_c)[None, :], hs, pos_c[None, :])
            opens = opens_c[None, :] * (costs.open_at_5 * (h >= 5) + costs.open_at_9 * (h >= 9))
        new, moved = _window_move(hs, pos_c[None, :], top_c[None, :])
        window = win_tab[np.where(np.isnan(moved), 25, np.minimum(moved, 24)).astype(np.intp)] \
            if any(costs.window) else None
        return _HandRows(move_tab[d], rest_tab[d], opens, window, _row(new), _row(pos_c))


def _row(frets: np.ndarray) -> np.ndarray:
    """Fret positions (NaN: none) as `_HandTables` rows."""
    return np.where(np.isnan(frets), 0, frets).astype(np.intp)


class _Walk(NamedTuple):
    """What every transition of one Viterbi reads, fixed for the decode: the notes, the costs, the onsets' note
    groups and candidate lists, and the popcount table of string masks."""

    notes_t: list
    costs: FretCosts
    groups: list
    layers: list
    popcount: np.ndarray


class _Path(NamedTuple):
    """The Viterbi's paths after one onset, one per candidate: `best` the cheapest total cost ending in it, `hand`
    and `win` the last fretted position and the lazy hand window along that path, as `_HandTables` rows."""

    best: np.ndarray
    hand: np.ndarray
    win: np.ndarray


def _transition(walk: _Walk, t: int, mask_c, path: _Path, pair, hand_tables: _HandRows
                ) -> tuple[np.ndarray, np.ndarray]:
    """(total cost of every (previous candidate, candidate) pair from onset t - 1 to onset t: `path.best` plus the
    move, the hand window after each pair, as rows). `mask_c`: the current candidates' string masks; `pair`: the
    two lists' `_pair_terms`; `hand_tables`: the current list's `_HandTables`."""
    notes_t, costs, prev_g, g = walk.notes_t, walk.costs, walk.groups[t - 1], walk.groups[t]
    hand, win = path.hand, path.win
    onset = notes_t[g[0]][0]
    ends = [notes_t[i][0] + notes_t[i][1] for i in prev_g]
    total = path.best[:, None] + (hand_tables.rest if max(ends) < onset else hand_tables.move)[hand]
    for term in pair:  # in the order they were always added (a float sum's order is kept)
        if term is not None:
            total += term
    if costs.cut_sustain:
        sus = [k for k, e in enumerate(ends) if e > onset]
        if sus:
            sus_mask = np.array([sum(1 << x.assign[k][0] for k in sus if x.assign[k][0] >= 0)
                                 for x in walk.layers[t - 1]])
            total += costs.cut_sustain * walk.popcount[sus_mask[:, None] & mask_c[None, :]]
    if hand_tables.opens is not None:
        total += hand_tables.opens[hand]
    if hand_tables.window is not None:
        total += hand_tables.window[win]
    return total, hand_tables.new_win[win]


def _decode(notes_t, tuning, capo, max_fret, costs, gold=None, piece=None, nn=None):
    """Viterbi over onsets. Returns (groups, chosen candidate per group). `gold` (one (string index, fret) per
    note) is added to each onset's candidates, for fitting. `piece`: the `_piece_table` of a first pass (second
    pass; its terms are weighted by `costs.piece`). `nn`: extra cost per (note, string index), `_nn_costs`."""
    n_strings = len(tuning)
    groups = group_onsets(notes_t)
    layers = candidate_layers(notes_t, groups, tuning, capo, max_fret, costs, gold)
    if not layers:
        return groups, []
    move_tab, rest_tab = _shift_tables(costs)
    popcount = np.array([bin(i).count("1") for i in range(1 << n_strings)])
    win_tab = np.array([costs.window[b] for b in WIN_BIN] + [0.0])  # index 25: no move known
    tabs = (move_tab, rest_tab, popcount, win_tab)
    arrays = _LayerTables(notes_t, groups, layers, n_strings, costs, piece, nn)

    # Viterbi: path.best[j] = cheapest total cost ending in candidate j of the current layer. `path.hand[j]` carries
    # the last fretted position along that path, so open strings do not make the hand forget where it was.
    walk = _Walk(notes_t, costs, groups, layers, popcount)
    prev = arrays(0)
    with np.errstate(invalid="ignore"):  # NaN positions (no hand yet, nothing fretted) compare False, as meant
        room = max_fret - capo  # the highest fret a candidate holds; a human fingering (`gold`) may hold more
        if gold is not None:
            room = max([room, *(int(c.top) for layer in layers for c in layer if not math.isnan(c.top))])
        hand_tables = _HandTables(costs, tabs, room)
        start = hand_tables(layers[0], prev).pos  # lazy hand window along each path too; as table rows
        path = _Path(prev[2].copy(), start, start)
        back: list[np.ndarray] = []
        pairs: dict[tuple[int, int], tuple] = {}  # `_pair_terms` by the two candidate lists (alive in `layers`)
        for t in range(1, len(layers)):
            cur = arrays(t)
            key = (id(layers[t - 1]), id(layers[t]))
            if key not in pairs:
                pairs[key] = _pair_terms(notes_t, costs, groups[t - 1], groups[t], prev, cur)
            here = hand_tables(layers[t], cur)
            total, new_win = _transition(walk, t, cur[4], path, pairs[key], here)
            ptr = total.argmin(axis=0)
            path = _Path(total.min(axis=0) + cur[2],  # the argmin's own values
                         np.where(here.pos == 0, path.hand[ptr], here.pos),  # nothing fretted: it keeps the hand
                         new_win[ptr, np.arange(len(ptr))])
            back.append(ptr)
            prev = cur

    j = int(path.best.argmin())
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
    costs: FretCosts | None = None,
    position: int | None = None,
    program: int | None = None,
    extra: np.ndarray | None = None,
) -> list[tuple[int, int]]:
    """One (string, fret) per note, in input order, minimising the fitted fingering cost (hand shifts, stretch,
    position height, string choice; see `fingering_features`).

    `notes`: (onset_tick, duration_tick, pitch) tuples or objects with .time/.duration/.pitch (symusic notes).
    Notes with the same onset form a chord and get distinct strings. Returns `UNPLAYABLE` (-1, -1) for a
    note that cannot be played (see the module docstring). Frets are relative to the capo.
    `position`: play in this position if the notes allow (the index finger at that fret, the hand covering it and
    the next three; 0 = open position): every fret outside that window costs `POSITION_WEIGHT`, and so does an
    open string above position 4. None: the fitted costs choose.
    `costs`: the fingering costs; None: `costs_for_program(program)` (the track's General MIDI program: a
    distorted guitar's riffs are fingered as rock guitarists play them, anything else with the default costs).
    `extra`: more cost per (note in input order, string index 0 = lowest string; a last column for unplayable),
    added in every pass (fingering/combined.py adds a tab-token model's -log p(string) this way).
    """
    costs = costs_for_program(program) if costs is None else costs
    notes_t = [note_tuple(n) for n in notes]
    nn = _nn_costs(notes_t, tuning, capo, max_fret, costs, _nn_model(costs))  # the learned term, in every pass
    if position is not None and notes_t:
        away = _position_costs(notes_t, tuning, capo, max_fret, position)
        nn = away if nn is None else nn + away
    if extra is not None and notes_t:
        if extra.shape != (len(notes_t), len(tuning) + 1):
            raise ValueError(f"extra costs of shape {extra.shape} for {len(notes_t)} notes on {len(tuning)} strings")
        nn = extra if nn is None else nn + extra
    if not any(costs.piece[:N_FROM_FIRST]):
        return _one_pass(notes_t, tuning, capo, max_fret, costs, nn)
    piece = _piece_table(notes_t, tuning, capo, max_fret, _one_pass(notes_t, tuning, capo, max_fret, costs.first(), nn))
    return _frets_of(notes_t, *_decode(notes_t, tuning, capo, max_fret, costs, piece=piece, nn=nn), len(tuning))


POSITION_WEIGHT = 3.0  # per fret outside the requested position's window (fret(position=...))


def _position_costs(notes_t, tuning, capo, max_fret, position: int) -> np.ndarray:
    """POSITION_WEIGHT x frets outside the window [p, p + 3] (p = max(position, 1)) per (note, string index; last
    column 0: unplayable); an open string counts 0 up to position 4 and 1 above."""
    n = len(tuning)
    lo = max(int(position), 1)
    pitch = np.array([x[2] for x in notes_t], dtype=float)
    f = pitch[:, None] - (np.asarray(tuning, dtype=float)[None, :] + capo)
    away = np.maximum(lo - f, 0) + np.maximum(f - (lo + 3), 0)
    away = np.where(f == 0, float(position > 4), away)
    out = np.zeros((len(notes_t), n + 1))
    out[:, :n] = POSITION_WEIGHT * np.where((f >= 0) & (f <= max_fret - capo), away, 0.0)
    return out


def _one_pass(notes_t, tuning, capo, max_fret, costs, nn=None) -> list[tuple[int, int]]:
    """Decode with the pitch-only piece features (none when their weights are 0) and the learned term `nn`."""
    piece = _piece_table(notes_t, tuning, capo, max_fret, None) if any(costs.piece) else None
    return _frets_of(notes_t, *_decode(notes_t, tuning, capo, max_fret, costs, piece=piece, nn=nn), len(tuning))


def piece_table(notes: Iterable[Any], tuning: Sequence[int] = STANDARD_TUNING, capo: int = 0,
                max_fret: int = MAX_FRET, costs: FretCosts = DEFAULT_COSTS) -> np.ndarray:
    """Run the first pass (`costs.first()`) and return its piece-level feature table, (notes, strings, N_PIECE)
    with strings indexed from the lowest: what the second pass of `fret()` adds to the cost (`costs.piece`)."""
    notes_t = [note_tuple(n) for n in notes]
    first = costs.first()
    nn = _nn_costs(notes_t, tuning, capo, max_fret, first, _nn_model(first))
    return _piece_table(notes_t, tuning, capo, max_fret, _one_pass(notes_t, tuning, capo, max_fret, first, nn))


def _frets_of(notes_t, groups, chosen, n_strings: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes_t)
    for g, cand in zip(groups, chosen):
        for k, i in enumerate(g):
            s, f = cand.assign[k]
            out[i] = UNPLAYABLE if s < 0 else (n_strings - s, f)
    return out


def fingering_features(
    notes: Iterable[Any], frets: Sequence[tuple[int, int]], tuning: Sequence[int] = STANDARD_TUNING,
    piece: np.ndarray | None = None,
) -> np.ndarray:
    """Feature counts of one fingering (`frets`: (string, fret) per note, as `fret()` returns) such that `fret()`
    minimises `FretCosts.vector() @ fingering_features(..., piece=piece_table(...))` (plus the fixed
    `dropped`/`impossible` costs). Without `piece` the piece-level (second-pass) features are 0.
    The reference the fast Viterbi is tested against, and what fitting the weights uses."""
    notes_t = [note_tuple(n) for n in notes]
    n_strings = len(tuning)
    acc = np.zeros(N_FEATURES)
    if piece is not None:
        for i, (s, _) in enumerate(frets):
            if s >= 1:
                acc[PIECE0:] += piece[i, n_strings - s]
    hand = None
    win = math.nan
    prev = None  # (group, assign, mean string)
    for g in group_onsets(notes_t):
        assign = tuple(UNPLAYABLE if frets[i][0] < 0 else (n_strings - frets[i][0], frets[i][1]) for i in g)
        chord_features(assign, n_strings, acc)
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
                acc[MOVE0 + MOVE_BIN[d]] += 1
                if max(ends) < onset:
                    acc[MOVE_REST] += min(d, 12)
            if pms is not None and ms is not None:
                acc[JUMP] += abs(pms - ms)
            if len(pg) == 1 and len(g) == 1 and pa[0][0] >= 0 and assign[0][0] >= 0:
                ds = assign[0][0] - pa[0][0]
                if ds * (notes_t[g[0]][2] - notes_t[pg[0]][2]) < 0:
                    acc[CONTRARY] += 1
                if ds == 0:
                    acc[SAME] += 1
                    acc[SLIDE] += abs(assign[0][1] - pa[0][1])
            used = {s for s, _ in played}
            acc[CUT] += sum(1 for k, e in enumerate(ends) if e > onset and pa[k][0] >= 0 and pa[k][0] in used)
            h = pos if pos is not None else hand
            if h is not None:
                n_open = sum(1 for _, f in played if f == 0)
                acc[OPEN5] += n_open * (h >= 5)
                acc[OPEN9] += n_open * (h >= 9)
        if pos is not None:
            new, moved = _window_move(np.float64(win), np.float64(pos), np.float64(max(fretted)))
            if not math.isnan(moved):
                acc[WIN0 + WIN_BIN[min(int(moved), 24)]] += 1
            win = float(new)
            hand = pos
        prev = (g, assign, ms)
    return acc


def fret_lowest(
    notes: Iterable[Any], tuning: Sequence[int] = STANDARD_TUNING, capo: int = 0, max_fret: int = MAX_FRET
) -> list[tuple[int, int]]:
    """Baseline: each chord gets the distinct-string assignment with the smallest sum of frets (lowest-fret rule)."""
    notes_t = [note_tuple(n) for n in notes]
    n_strings = len(tuning)
    opens = [p + capo for p in tuning]
    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes_t)

    def cost(a):
        return sum(1000 if s < 0 else f for s, f in a)

    for g in group_onsets(notes_t):
        st = chord_cands([notes_t[i][2] for i in g], opens, max_fret - capo, cost, 1)[0]
        for k, i in enumerate(g):
            s, f = st.assign[k]
            out[i] = UNPLAYABLE if s < 0 else (n_strings - s, f)
    return out
