"""ASCII tab out: what a guitarist reads. One line per string, the score's own bars and time signatures, a grid
chosen per bar, the notes' techniques in the usual notation, systems wrapped at a width.

How a tab reads (the header of every tab says the essentials):

- String labels are pitch names with their octave, highest string on top (standard tuning: E4 B3 G3 D3 A2 E2;
  drop D: E4 B3 G3 D3 A2 D2; seven-string: E4 B3 G3 D3 A2 E2 B1). Every string is told apart, whatever the
  tuning, by one rule; octaves are scientific pitch (C4 = middle C, so the high E string is E4).
- Bars follow the score's time signatures; the header names the first, and a change is written above the bar
  where it happens, as are tempo changes ("tempo 90") and the number of the first bar of every system.
- Rhythm: within a bar one column step is one grid step, so positions show time. The grid is the one most bars
  need (header: "one column = 1/8 note"); a bar whose notes need another (a run of 16ths, triplets) gets the
  coarsest that holds them, written above it ("[1/16]", "[1/8 triplet]"). Columns are as wide as the widest
  fret and a dash; technique marks widen their own column; nothing overlaps.
- Tempo is quarter notes per minute, as a musician writes it: whole BPM, or a half (97.5) when the tempo is within
  0.05 BPM of one (a MIDI file stores microseconds per quarter, so a written 97.5 comes back as 97.4999).
- Techniques: x dead note; (5) ghost note; 5h7 hammer-on, 7p5 pull-off (h when the pitch rises from the previous
  note on the string, p when it falls); 5/7 and 7\\5 slides, /7 and \\7 slides into a note (from below, above),
  7\\ and 7/ slides off it; 7b9 bend (to the pitch of fret 9: a full step), 7b9r7 bend and release, 7pb9 pre-bend,
  7b7½ a quarter-tone bend (half a fret); 7~ vibrato; <12> natural harmonic, [12] artificial (pinch, tapped,
  semi) harmonic; t12 tapped note; a "PM" line right above the strings spans palm-muted notes, a "let ring"
  line notes left ringing.
- Runs of empty bars (before the guitar enters, or four or more in a row later) fold into one line such as
  "[bars 1-35: rest]". Notes that cannot be placed on the tuning are listed under the tab, never dropped silently
  (`unplaced_notes`, `describe_unplaced`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from guitarformer.fingering import finger_score
from guitarformer.music.bars import bar_index
from guitarformer.music.bars import bars as bar_spans
from guitarformer.music.bars import signature_at as bar_signature
from guitarformer.music.guitar import MAX_FRET, TUNINGS, pitch_name
from guitarformer.music.score import PLAIN, Technique

MIN_WIDTH = 20  # a label, a bar line and a few columns
# Grids, coarsest first: tab columns per quarter note, and how the header/marker names one column.
GRIDS = (1, 2, 3, 4, 6, 8, 12, 16)
GRID_NAMES = {1: "1/4", 2: "1/8", 3: "1/8 triplet", 4: "1/16", 6: "1/16 triplet", 8: "1/32", 12: "1/32 triplet",
              16: "1/64"}
_CELL = 2  # characters per grid step at least: a one-digit fret and a dash
_CONNECTORS = set("hp/\\t")  # marks that may sit in the dash between two notes (5h7, 5/7)
# Span lines above the strings, top to bottom; PM right above them, where tab readers look for it.
_SPANS = (("let ring", "let_ring"), ("PM", "palm_mute"))


# ---------------------------------------------------------------- facts every output shares


def string_labels(tuning: Sequence[int]) -> list[str]:
    """Tab line labels, highest string first: pitch names with octave (standard: E4 B3 G3 D3 A2 E2), so every
    string is told apart in any tuning (drop D's strings 1 and 6 are E4 and D2; a seven-string's are E4 and B1)."""
    return [pitch_name(p) for p in reversed(tuning)]


def tuning_name(tuning: Sequence[int]) -> str:
    """'standard', 'drop-d', ... for a named tuning, else ''."""
    return next((k for k, v in TUNINGS.items() if tuple(v) == tuple(tuning)), "")


def format_tempo(qpm: float) -> str:
    """A tempo as a musician writes it: whole BPM ('121' for 121.29, '90' for 90.0001), or a half BPM when the tempo
    is within 0.05 of one ('97.5' for 97.4999: MIDI stores microseconds per quarter)."""
    half = round(qpm * 2) / 2
    value = half if abs(qpm - half) <= 0.05 else float(round(qpm))
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def tempo_at(score, tick: int) -> float:
    """Quarter notes per minute in force at `tick`: the last tempo event at or before it (of several at one tick,
    the last one counts, as a MIDI player plays them); 120 without any."""
    qpm = None
    for t in score.tempos:
        if t.time <= tick:
            qpm = t.qpm
        elif qpm is not None:
            break
    if qpm is None:
        qpm = score.tempos[0].qpm if len(score.tempos) else 120.0
    return float(qpm)


def bars_of(score, end: int) -> list[tuple[int, int]]:
    """(start, length) in ticks of every bar up to `end`, from the score's time signatures: music.bars' bars (4/4
    before the first; a signature that falls inside a bar starts with the next bar)."""
    return [(start, length) for start, length, _, _ in bar_spans(_signatures(score), score.ticks_per_quarter, end)]


def signature_at(score, tick: int) -> tuple[int, int]:
    """(numerator, denominator) of the bar that holds `tick` (music.bars.signature_at)."""
    return bar_signature(_signatures(score), score.ticks_per_quarter, tick)


def _signatures(score) -> list[tuple[int, int, int]]:
    """The score's time signatures as triples, without the malformed ones (a zero numerator or denominator) a
    hostile file may hold."""
    return [(int(ts.time), int(ts.numerator), int(ts.denominator)) for ts in score.time_signatures
            if ts.numerator > 0 and ts.denominator > 0]


def resolve_frets(gs, frets) -> list[tuple[int, int]]:
    """The fingering to render: `frets`, else the score's own, else `fret()`'s."""
    if frets is None:
        frets = finger_score(gs, keep_own=True).frets
    if len(frets) != len(gs.track.notes):
        raise ValueError(f"{len(frets)} frets for {len(gs.track.notes)} notes")
    return list(frets)


def techniques_of(gs) -> list[Technique]:
    """One Technique per note (plain where the score knows none)."""
    n = len(gs.track.notes)
    if gs.techniques is None:
        return [PLAIN] * n
    if len(gs.techniques) != n:
        raise ValueError(f"{len(gs.techniques)} techniques for {n} notes")
    return list(gs.techniques)


# ---------------------------------------------------------------- notes that cannot be placed


@dataclass(frozen=True)
class Unplaced:
    """A note the tab (or GP5 file) cannot show: its index in the track, its bar (1-based), pitch and why."""

    index: int
    bar: int
    pitch: int
    reason: str  # "below" the lowest string, "above" the top fret, "chord" (more notes at once than strings), "busy"


def unplaced_notes(gs, frets=None) -> list[Unplaced]:
    """Every note without a (string, fret) on the part's tuning, with the bar it falls in and why."""
    frets = resolve_frets(gs, frets)
    notes = gs.track.notes
    n = len(gs.tuning)
    lo, hi = min(gs.tuning) + gs.capo, max(gs.tuning) + MAX_FRET
    end = max((x.time + 1 for x in notes), default=1)
    starts = [b[0] for b in bars_of(gs.score, end)]
    at_once: dict[int, int] = {}
    for x in notes:
        at_once[x.time] = at_once.get(x.time, 0) + 1
    out = []
    for i, (x, (s, f)) in enumerate(zip(notes, frets)):
        if f >= 0 and 1 <= s <= n:
            continue
        reason = "below" if x.pitch < lo else "above" if x.pitch > hi else "chord" if at_once[x.time] > n else "busy"
        out.append(Unplaced(i, bar_index(starts, x.time) + 1, int(x.pitch), reason))
    return out


def describe_unplaced(unplaced: Sequence[Unplaced], tuning: Sequence[int], capo: int = 0) -> str:
    """One line: '3 notes could not be placed on this tuning: bars 2, 7, 9 (E2 below the lowest string)'; '' if none."""
    if not unplaced:
        return ""
    bars = sorted({u.bar for u in unplaced})
    where = f"bar {bars[0]}" if len(bars) == 1 else "bars " + _number_list(bars)
    why = []
    lowest = pitch_name(min(tuning) + capo) + (f" with capo {capo}" if capo else "")
    for reason, text in (("below", f"below the lowest string, {lowest}"),
                         ("above", f"above fret {MAX_FRET} of the top string"),
                         ("chord", f"in chords of more notes than the {len(tuning)} strings"),
                         ("busy", "with no free string at that moment")):
        group = [u for u in unplaced if u.reason == reason]
        if group:
            names = sorted({u.pitch for u in group})
            listed = ", ".join(pitch_name(p) for p in names[:4]) + (", ..." if len(names) > 4 else "")
            why.append(f"{listed} {text}")
    n = len(unplaced)
    return f"{n} note{'s' if n > 1 else ''} could not be placed on this tuning: {where} ({'; '.join(why)})"


def _number_list(nums: list[int], limit: int = 12) -> str:
    """'2, 7, 9-12' (runs of three or more joined), at most `limit` items then '...'."""
    items, i = [], 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        items += [f"{nums[i]}-{nums[j]}"] if j - i >= 2 else [str(x) for x in nums[i:j + 1]]
        i = j + 1
    return ", ".join(items[:limit]) + (", ..." if len(items) > limit else "")


# ---------------------------------------------------------------- technique notation


def _bend_text(fret_: int, points) -> str:
    """'b9', 'b9r7', 'pb9r7', 'b7½' (from fret 7): the bend's turning points as the frets whose pitch they reach
    (points in quarter tones; an odd number of them is half a fret)."""
    amounts = [round(a) for _, a in sorted(points)]
    turns: list[int] = []
    for a in amounts:
        if turns and a == turns[-1]:
            continue
        if len(turns) >= 2 and (a - turns[-1]) * (turns[-1] - turns[-2]) > 0:
            turns[-1] = a  # still going the same way
        else:
            turns.append(a)
    if max(turns, default=0) <= 0:
        return ""

    def target(q: int) -> str:  # the fret whose pitch the bend reaches; a quarter tone is half a fret
        return f"{fret_ + q // 2}{'½' if q % 2 else ''}"

    out = f"pb{target(turns[0])}" if turns[0] > 0 else ""
    for prev, a in zip(turns, turns[1:]):
        out += ("b" if a > prev else "r") + target(a)
    return out


def _note_marks(t: Technique, fret_: int, pitch: int, prev_pitch: int | None, next_pitch: int | None
                ) -> tuple[str, str, str, str]:
    """(connector, opening, core, closing) of one note: the connector ('h', 'p') sits in the dash after the previous
    note, the opening ('/', 't', '(') left of the fret's column after a dash, the closing ('b9', '~', ')', and a
    slide to the next note: '/') right of it."""
    core = "x" if t.dead else str(fret_)
    conn = ("p" if prev_pitch is not None and pitch < prev_pitch else "h") if t.hammer else ""
    # a slide into the note comes from no particular fret: it gets a dash before it, so it does not read as a slide
    # from the previous note
    opening = {"below": "/", "above": "\\"}.get(t.slide_in, "") + ("t" if t.tap else "")
    bracket = ("<", ">") if t.harmonic == "natural" else ("[", "]") if t.harmonic and not t.dead else ("", "")
    closing = bracket[1] + (_bend_text(fret_, t.bend) if t.bend and not t.dead else "") + ("~" if t.vibrato else "")
    if t.ghost:
        opening, closing = opening + "(", closing + ")"
    opening += bracket[0]
    if t.slide_out in ("shift", "legato"):
        closing += "\\" if next_pitch is not None and next_pitch < pitch else "/"
    elif t.slide_out:
        closing += "/" if t.slide_out == "up" else "\\"
    return conn, opening, core, closing


# ---------------------------------------------------------------- layout


@dataclass
class _Note:
    index: int
    string: int  # 0 = highest string
    tick: int  # from the start of its bar
    marks: tuple[str, str, str, str]
    tech: Technique


@dataclass
class _Bar:
    number: int  # 1-based
    start: int
    length: int
    notes: list[_Note]
    sounding: bool  # a note sounds in it (an onset, or one held from before)
    grid: int = 0
    lines: list[str] | None = None
    onsets: list | None = None  # (first column, last column, span kinds such as "PM") of each column with notes
    marks: list[str] | None = None  # text written above the bar
    open_end: bool = False  # a piece of a bar too wide for a line, continued on the next system


def _grid_fits(g: int, tpq: int, length: int, ticks: list[int]) -> bool:
    step = tpq / g
    tol = max(1.0, tpq / 240)  # rounding only: a triplet at 100 ticks per quarter, a tick off in a MIDI export
    if abs(length / step - round(length / step)) * step > tol:
        return False
    return all(abs(t / step - round(t / step)) * step <= tol for t in ticks)


def _bar_grid(tpq: int, length: int, ticks: list[int]) -> int | None:
    """The coarsest grid that holds the bar's onsets exactly (None: they are not quantised)."""
    return next((g for g in GRIDS if _grid_fits(g, tpq, length, ticks)), None)


def _loose_grid(tpq: int, length: int, ticks: list[int], base: int) -> int:
    """For onsets off every grid (played, not quantised): the base grid, else the coarsest that fits the bar,
    if either keeps onsets more than a 64th apart in distinct columns; else the finest."""
    groups = []
    for t in sorted(ticks):
        if not groups or t - groups[-1] > tpq / 16:
            groups.append(t)
    for g in (base, *GRIDS):
        slots = [round(t * g / tpq) for t in groups]
        if len(set(slots)) == len(slots) and _grid_fits(g, tpq, length, []):
            return g
    return GRIDS[-1]


def _lay_out_bar(bar: _Bar, tpq: int, n_strings: int, cell: int) -> None:
    """Fill bar.lines (one string of characters per tab line, without bar lines) and bar.onsets; a grid step is
    `cell` characters, more where a note's marks need them."""
    step = tpq / bar.grid
    n_slots = max(1, round(bar.length / step))
    slots: dict[int, dict[int, _Note]] = {}
    for x in sorted(bar.notes, key=lambda x: (x.tick, x.string)):
        k = min(round(x.tick / step), n_slots - 1)
        while x.string in slots.get(k, {}):  # two onsets in one column on one string: the later one moves right
            k += 1
        slots.setdefault(k, {})[x.string] = x
    n_slots = max(n_slots, max(slots, default=0) + 1)

    rows = [[] for _ in range(n_strings)]  # (column, text) per string
    last_end = [0] * n_strings  # first free column after the previous note's marks on each string
    linked_from: set[int] = set()  # strings whose last note slides into the next one
    onsets = []
    col = 1  # one dash after the bar line
    for k in range(n_slots):
        col = max(col, 1 + k * cell)
        here = slots.get(k, {})
        for s, x in here.items():
            conn, opening, _, _ = x.marks
            linked = s in linked_from  # the previous note's slide connector is this note's separator
            col = max(col, last_end[s] + len(opening) + (len(conn) if conn or linked else 1))
        step = cell
        for s, x in here.items():
            conn, opening, core, closing = x.marks
            rows[s].append((col - len(opening) - len(conn), conn + opening))
            rows[s].append((col, core + closing))
            last_end[s] = col + len(core) + len(closing)
            # a slide to the next note ends in its connector ("5/7"); anything else wants a dash after it
            linked = x.tech.slide_out in ("shift", "legato") and closing.endswith(("/", "\\"))
            (linked_from.add if linked else linked_from.discard)(s)
            step = max(step, len(core) + len(closing) + (0 if linked else 1))
        if here:
            ends = max(last_end[s] for s in here)
            onsets.append((col, ends - 1, {kind for kind, attr in _SPANS
                                           if any(getattr(x.tech, attr) for x in here.values())}))
        col += step
    length = max(col, max(last_end) + 1)
    lines = []
    for s in range(n_strings):
        chars = ["-"] * length
        for c, text in rows[s]:
            chars[c:c + len(text)] = text
        lines.append("".join(chars))
    bar.lines, bar.onsets = lines, onsets


def render_ascii_tab(gs, frets=None, width: int = 80, bars: tuple[int, int] | None = None) -> str:
    """The part as a plain-text tab (see the module docstring for how it reads), wrapped at `width` characters.

    `frets` defaults to gs.frets, else to `fret()`; techniques come from gs.techniques. `bars` = (first, last),
    1-based and inclusive, renders only those bars (numbered as in the whole piece). Notes that cannot be placed
    are listed under the tab (`unplaced_notes` gives them to callers)."""
    if width < MIN_WIDTH:
        raise ValueError(f"width {width} is too narrow for a tab (at least {MIN_WIDTH} characters)")
    frets = resolve_frets(gs, frets)
    all_bars = _bars_with_notes(gs, frets)
    first, last = (1, len(all_bars)) if bars is None else bars
    if not 1 <= first <= last:
        raise ValueError(f"bars {first}-{last}: first must be at least 1 and not after last")
    shown = all_bars[first - 1:last]
    if not shown:
        raise ValueError(f"bars {first}-{last}: the part has {len(all_bars)} bars")
    score = gs.score
    tpq = score.ticks_per_quarter

    # A grid step is as wide as the widest fret and a dash, in every bar, so that columns are time and bars of one
    # grid are equally wide; marks that need more room (7b9r7, <12>) widen their own step only.
    cell = max(_CELL, 1 + max((len(x.marks[2]) for bar in shown for x in bar.notes), default=1))
    base = _choose_grids(shown, tpq)
    for bar in shown:
        _lay_out_bar(bar, tpq, len(gs.tuning), cell)

    # Written above each bar: time signature and tempo changes, a grid other than the base.
    sig0 = signature_at(score, shown[0].start)
    tempo0 = format_tempo(tempo_at(score, shown[0].start))
    sig, tempo = sig0, tempo0
    generated = gs.extra.get("generated_from_tick")  # a continued prompt: where the model's bars begin
    for bar in shown:
        here = signature_at(score, bar.start), format_tempo(tempo_at(score, bar.start))
        new_here = generated is not None and bar.start <= generated < bar.start + bar.length
        bar.marks = (["[generated from here]"] * new_here
                     + [f"{here[0][0]}/{here[0][1]}"] * (here[0] != sig) + [f"tempo {here[1]}"] * (here[1] != tempo)
                     + [f"[{GRID_NAMES[bar.grid]}]"] * (bar.grid != base))
        sig, tempo = here

    labels = string_labels(gs.tuning)
    lw = max(len(x) for x in labels)
    name = tuning_name(gs.tuning)
    out = [gs.name] if gs.name else []
    out.append("Tuning: " + " ".join(labels[::-1]) + " (low to high" + (f", {name})" if name else ")")
               + (f"   Capo: {gs.capo}" if gs.capo else ""))
    eighths = f" (eighth = {format_tempo(float(tempo0) * 2)})" if sig0[1] == 8 else ""
    out.append(f"Time: {sig0[0]}/{sig0[1]}   Tempo: {tempo0} bpm{eighths}")
    out.append((f"One column = 1/{base * 4} note" if base in (1, 2, 4, 8, 16) else f"One column = {GRID_NAMES[base]}")
               + (" (bars marked [..] above use their own grid)" if any(b.grid != base for b in shown) else ""))
    out.append("")

    room = width - lw - 1  # characters after the label's "|"
    system: list[_Bar] = []
    for item in _fold_rests(shown):
        pieces = _split_bar(item, room) if isinstance(item, _Bar) else [item]
        for piece in pieces:
            if system and (isinstance(piece, str) or sum(len(b.lines[0]) + 1 for b in system + [piece]) > room):
                out += _system_text(system, labels, lw, len(gs.tuning)) + [""]
                system = []
            if isinstance(piece, str):
                out += [piece, ""]
            else:
                system.append(piece)
    if system:
        out += _system_text(system, labels, lw, len(gs.tuning)) + [""]
    missing = describe_unplaced([u for u in unplaced_notes(gs, frets) if first <= u.bar <= last], gs.tuning, gs.capo)
    if missing:
        out += [f"Not shown: {missing}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _bars_with_notes(gs, frets) -> list[_Bar]:
    """Every bar of the part with its playable notes (and their marks) and whether anything sounds in it."""
    techs = techniques_of(gs)
    notes = gs.track.notes
    n = len(gs.tuning)
    layout = bars_of(gs.score, max((x.time + 1 for x in notes), default=1))
    starts = [b[0] for b in layout]
    bars = [_Bar(k + 1, t, length, [], False) for k, (t, length) in enumerate(layout)]
    # Neighbours on each string, in time order, for h/p and slide directions.
    order = sorted((i for i, (s, f) in enumerate(frets) if f >= 0 and 1 <= s <= n), key=lambda i: notes[i].time)
    prev_on: dict[int, int] = {}
    next_on: dict[int, int] = {}
    last: dict[int, int] = {}
    for i in order:
        s = frets[i][0]
        if s in last:
            prev_on[i], next_on[last[s]] = last[s], i
        last[s] = i
    for i in order:
        x, (s, f) = notes[i], frets[i]
        b = bar_index(starts, x.time)
        prev = notes[prev_on[i]].pitch if i in prev_on else None
        nxt = notes[next_on[i]].pitch if i in next_on else None
        marks = _note_marks(techs[i], f, x.pitch, prev, nxt)
        bars[b].notes.append(_Note(i, s - 1, x.time - starts[b], marks, techs[i]))
    for x in notes:  # what sounds in each bar, held notes included
        b0 = bar_index(starts, x.time)
        b1 = bar_index(starts, x.time + max(1, x.duration) - 1)  # the bar of its last tick
        for b in range(b0, min(b1, len(bars) - 1) + 1):
            bars[b].sounding = True
    return bars


def _choose_grids(bars: list[_Bar], tpq: int) -> int:
    """Set each bar's grid and return the base: the grid that holds the onsets of 80% of the bars with notes; a bar
    it cannot hold gets the coarsest grid that does (or, for onsets off every grid, one that keeps them apart)."""
    needs = {bar.number: _bar_grid(tpq, bar.length, [x.tick for x in bar.notes]) for bar in bars if bar.notes}
    exact = sorted((g for g in needs.values() if g), key=GRIDS.index)
    base = exact[max(0, math.ceil(0.8 * len(exact)) - 1)] if exact else 2
    for bar in bars:
        ticks = [x.tick for x in bar.notes]
        if _grid_fits(base, tpq, bar.length, ticks):
            bar.grid = base
        else:
            bar.grid = needs.get(bar.number) or _loose_grid(tpq, bar.length, ticks, base)
    return base


def _fold_rests(bars: list[_Bar]) -> list:
    """The bars, with runs of bars where nothing sounds (all of them before the first note, four or more later)
    as one line: '[bars 1-35: rest]'."""
    items: list = []
    k = 0
    while k < len(bars):
        j = k
        while j < len(bars) and not bars[j].sounding:
            j += 1
        if j > k and (k == 0 or j - k >= 4):
            a, b = bars[k].number, bars[j - 1].number
            items.append(f"[bar {a}: rest]" if a == b else f"[bars {a}-{b}: rest]")
            k = j
        else:
            items.append(bars[k])
            k += 1
    return items


def _split_bar(bar: _Bar, room: int) -> list[_Bar]:
    """A bar wider than a line, cut between two dashes on every string where it can, else after a dash (the pieces
    after the first are marked as the bar's continuation and the bar line comes only after the last)."""
    if len(bar.lines[0]) + 1 <= room:
        return [bar]
    pieces, lines = [], bar.lines
    begin, part = 0, 0
    while begin < len(lines[0]):
        stop = min(len(lines[0]), begin + room - 1)
        if stop < len(lines[0]):  # cut before a note's marks, not through them
            between = [c for c in range(begin + 1, stop + 1) if all(ln[c - 1:c + 1] == "--" for ln in lines)]
            after = [c for c in range(begin + 1, stop + 1) if all(ln[c - 1] == "-" for ln in lines)]
            stop = max(between or after or [stop])
        pieces.append(_Bar(bar.number, bar.start, bar.length, [], True, bar.grid, [ln[begin:stop] for ln in lines],
                           [(a - begin, b - begin, f) for a, b, f in bar.onsets if begin <= a < stop],
                           bar.marks if part == 0 else ["(cont.)"], open_end=stop < len(lines[0])))
        begin, part = stop, part + 1
    return pieces


def _system_text(system: list[_Bar], labels: list[str], lw: int, n: int) -> list[str]:
    """The lines of one system: marks above the bars, span lines (PM, let ring), the string lines."""
    width = lw + 1 + sum(len(b.lines[0]) + 1 for b in system)
    marks = str(system[0].number)
    col = lw + 1
    starts = []
    for bar in system:
        starts.append(col)
        text = " ".join(bar.marks or [])
        if text:  # above the bar's first column, or after the previous mark where that one runs long
            marks = marks + " " * max(1, col + 1 - len(marks)) + text
        col += len(bar.lines[0]) + 1
    lines = [marks]

    for kind, _ in _SPANS:
        # onsets in system order: (first column, last column, flagged); a span runs over consecutive flagged onsets
        onsets = [(starts[i] + a, starts[i] + b, kind in f) for i, bar in enumerate(system)
                  for a, b, f in bar.onsets]
        if not any(f for _, _, f in onsets):
            continue
        chars = [" "] * width
        runs, cur = [], None
        for a, b, flagged in onsets:
            if flagged:
                cur = [a, b] if cur is None else [cur[0], b]
            elif cur is not None:
                runs.append(cur)
                cur = None
        if cur is not None:
            runs.append(cur)
        free = 0  # the first column after what is written so far: nothing is written over it
        for a, b in runs:
            if a > free or free == 0:  # room for the label (a space after the last one): "let ring---"
                text = kind + "-" * max(0, b - a + 1 - len(kind))
            else:  # the last label runs on over this run: dashes only, where it left room ("let ring--")
                a, text = free, "-" * max(0, b - free + 1)
            chars[a:a + len(text)] = text
            free = max(free, a + len(text))
        lines.append("".join(chars).rstrip())

    for s in range(n):
        row = f"{labels[s]:<{lw}}|"
        for bar in system:
            row += bar.lines[s] + ("" if bar.open_end else "|")
        lines.append(row)
    return lines


def write_ascii_tab(gs, path, frets=None, width: int = 80, bars: tuple[int, int] | None = None) -> None:
    """Write `render_ascii_tab(gs, ...)` to `path`."""
    Path(path).write_text(render_ascii_tab(gs, frets, width, bars), encoding="utf-8")
