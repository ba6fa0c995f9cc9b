"""ASCII tab out: one line per string, bar lines from the time signatures, wrapped at a width."""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Sequence

from guitarformer.fretting import fret
from guitarformer.music.guitar import PITCH_NAMES

_GRIDS = (1, 2, 4, 8)  # tab columns per quarter note, coarsest first


def string_labels(tuning: Sequence[int]) -> list[str]:
    """Tab line labels, highest string first: standard tuning gives e B G D A E."""
    names = [PITCH_NAMES[p % 12] for p in tuning]
    if len(names) > 1 and names[-1] == names[0]:
        names[-1] = names[-1].lower()  # the usual 'e' for the high E string
    return names[::-1]


def bars_of(score, end: int) -> list[tuple[int, int]]:
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


def resolve_frets(gs, frets) -> list[tuple[int, int]]:
    if frets is None:
        frets = gs.frets
    if frets is None:
        frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
    if len(frets) != len(gs.track.notes):
        raise ValueError(f"{len(frets)} frets for {len(gs.track.notes)} notes")
    return list(frets)


def render_ascii_tab(gs, frets=None, width: int = 80) -> str:
    """The part as a plain-text tab: one line per string (labels from the tuning), bar lines from the time
    signatures, one column per grid step (the coarsest of 1/4..1/32 that holds the onsets), wrapped at `width`.
    `frets` defaults to gs.frets, else to `fret()`; unplayable notes are left out."""
    frets = resolve_frets(gs, frets)
    notes = gs.track.notes
    tpq = gs.score.ticks_per_quarter
    n = len(gs.tuning)
    onsets = [int(x.time) for x in notes]
    per_q = next((g for g in _GRIDS if all((t * g) % tpq == 0 for t in onsets)), _GRIDS[-1])
    step = tpq / per_q  # ticks per column slot
    end = max((x.time + 1 for x in notes), default=1)
    bars = bars_of(gs.score, end)

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
    Path(path).write_text(render_ascii_tab(gs, frets, width), encoding="utf-8")