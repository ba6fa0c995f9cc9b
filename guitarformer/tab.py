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

from guitarformer.data.score import MAX_FRET, STANDARD_TUNING

UNPLAYABLE: tuple[int, int] = (-1, -1)


@dataclass(frozen=True)
class FretCosts:
    """Weights of the fingering cost. Defaults tuned on human GP tabs (scripts/bench_fretting.py, docs/FRETTING.md)."""

    position: float = 0.25  # per fret of the hand position (lowest fretted fret): prefer low positions
    open_string: float = 0.0  # added per open string (negative = bonus)
    stretch: float = 1.0  # per fret of span beyond `comfortable_span` within one chord
    comfortable_span: int = 2
    max_span: int = 5  # spans beyond this cost `impossible` (still allowed if nothing else fits)
    move: float = 0.5  # per fret the hand position shifts between consecutive onsets...
    move_cap: int = 24  # ...up to this many frets: a long shift costs about what a medium one does
    string_jump: float = 0.3  # per string the mean string moves between consecutive onsets
    cut_sustain: float = 0.0  # re-using a string that still sounds a note of the previous onset
    high_fret: float = 0.2  # per fret above `high_fret_from` (upper frets are rare in human tabs)
    high_fret_from: int = 12
    impossible: float = 50.0
    dropped: float = 1000.0  # per chord note left without a string


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


class _State:
    """One fingering of one onset's chord: a string index (0 = lowest) and fret per note, or (-1, -1)."""

    __slots__ = ("assign", "cost", "pos", "mean_string", "strings")

    def __init__(self, assign: tuple[tuple[int, int], ...], cost: float):
        self.assign = assign
        self.cost = cost
        fretted = [f for s, f in assign if f > 0]
        self.pos = min(fretted) if fretted else None  # hand position = index-finger fret
        played = [s for s, f in assign if s >= 0]
        self.mean_string = sum(played) / len(played) if played else None
        self.strings = frozenset(played)


def _chord_cost(assign: Sequence[tuple[int, int]], c: FretCosts) -> float:
    fretted = [f for s, f in assign if f > 0]
    cost = 0.0
    for s, f in assign:
        if s < 0:
            cost += c.dropped
        elif f == 0:
            cost += c.open_string
        elif f > c.high_fret_from:
            cost += c.high_fret * (f - c.high_fret_from)
    if fretted:
        lo, hi = min(fretted), max(fretted)
        cost += c.position * lo
        span = hi - lo
        if span > c.comfortable_span:
            cost += c.stretch * (span - c.comfortable_span)
        if span > c.max_span:
            cost += c.impossible
    return cost


def _chord_states(pitches: Sequence[int], opens: Sequence[int], max_fret: int, cost_fn, beam: int) -> list[_State]:
    """The `beam` cheapest assignments of the chord's notes to distinct strings."""
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
    return [_State(a, c) for c, a in results[:beam]]


def _transition(a: _State, a_hand: int | None, b: _State, sustained: frozenset, c: FretCosts) -> float:
    cost = 0.0
    if a_hand is not None and b.pos is not None:
        cost += c.move * min(abs(a_hand - b.pos), c.move_cap)
    if a.mean_string is not None and b.mean_string is not None:
        cost += c.string_jump * abs(a.mean_string - b.mean_string)
    if sustained:
        # Strings of `a` whose notes still sound at b's onset: playing on them cuts the note.
        for k, (s, f) in enumerate(a.assign):
            if k in sustained and s in b.strings:
                cost += c.cut_sustain
    return cost


def fret(
    notes: Iterable[Any],
    tuning: Sequence[int] = STANDARD_TUNING,
    capo: int = 0,
    max_fret: int = MAX_FRET,
    costs: FretCosts = DEFAULT_COSTS,
) -> list[tuple[int, int]]:
    """One (string, fret) per note, in input order, minimising hand movement, stretch and position height.

    `notes`: (onset_tick, duration_tick, pitch) tuples or objects with .time/.duration/.pitch (symusic notes).
    Notes with the same onset form a chord and get distinct strings. Returns `UNPLAYABLE` (-1, -1) for a
    note that cannot be played (see the module docstring). Frets are relative to the capo.
    """
    notes_t = [_note_tuple(n) for n in notes]
    n_strings = len(tuning)
    opens = [p + capo for p in tuning]  # index 0 = lowest string
    fret_room = max_fret - capo
    groups = _group_onsets(notes_t)
    layers: list[list[_State]] = []
    for g in groups:
        layers.append(_chord_states([notes_t[i][2] for i in g], opens, fret_room, lambda a: _chord_cost(a, costs), _BEAM))

    # Viterbi: best[j] = cheapest total cost ending in state j of the current layer. `hand[j]` carries the
    # last fretted position along that path, so open strings do not make the hand forget where it was.
    best = [s.cost for s in layers[0]] if layers else []
    hand = [s.pos for s in layers[0]] if layers else []
    back: list[list[int]] = []
    for t in range(1, len(layers)):
        prev_g, onset = groups[t - 1], notes_t[groups[t][0]][0]
        sustained = frozenset(k for k, i in enumerate(prev_g) if notes_t[i][0] + notes_t[i][1] > onset)
        new_best, new_hand, ptr = [], [], []
        prev = layers[t - 1]
        for b in layers[t]:
            bc, bj = math.inf, 0
            for j, a in enumerate(prev):
                v = best[j] + _transition(a, hand[j], b, sustained, costs)
                if v < bc:
                    bc, bj = v, j
            new_best.append(bc + b.cost)
            new_hand.append(b.pos if b.pos is not None else hand[bj])
            ptr.append(bj)
        best, hand = new_best, new_hand
        back.append(ptr)

    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes_t)
    if not layers:
        return out
    j = min(range(len(best)), key=best.__getitem__)
    for t in range(len(layers) - 1, -1, -1):
        for k, i in enumerate(groups[t]):
            s, f = layers[t][j].assign[k]
            out[i] = UNPLAYABLE if s < 0 else (n_strings - s, f)
        if t > 0:
            j = back[t - 1][j]
    return out


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
        st = _chord_states([notes_t[i][2] for i in g], opens, max_fret - capo, cost, 1)[0]
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
