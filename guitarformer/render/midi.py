"""MIDI out: guitar parts as one multi-track MIDI file (a drum part as a drum track, on channel 10).

Bends and vibrato become pitch-bend curves. MIDI bends a whole channel, so a part's bent and vibrato notes move to
a companion track of the same instrument ("... (bends)", its own channel) and carry the curves there; the plain
notes stay untouched. Our MIDI reader merges the companion back, so the part reads back as one. The companion's
bend range is set to 4 semitones (RPN 0), enough for the two whole steps a string bends. Vibrato is a
quarter-tone wobble at about 5.5 Hz at the part's tempo.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterable

import symusic

from guitarformer.music.guitar import GM_PROGRAM_NAMES, program_name
from guitarformer.music.score import GuitarScore, Technique
from guitarformer.readers.base import copy_timing
from guitarformer.readers.midi import BEND_TRACK_SUFFIX

GENERATED_MARKER = "generated"  # the MIDI marker at the tick where generated bars begin


def write_midi(gs_or_list: GuitarScore | Iterable[GuitarScore], path: str | os.PathLike, program: int | None = None,
               timing: GuitarScore | None = None) -> Path:
    """Write one or several guitar parts as one MIDI file (one track each, in their order); returns the path.

    Tempos, time signatures and markers come from `timing` (default: the first part); where its
    `extra["generated_from_tick"]` is set (a prompt continued or bars filled by a model), a "generated" marker shows
    where the new bars begin. `program` overrides every track's program. A track without a name of its own is
    named after its instrument ("Acoustic Guitar (steel)"). A drum part (GuitarScore.is_drum) is written as a drum
    track, which MIDI plays on channel 10, and keeps its kit whatever `program` says.
    """
    parts = [gs_or_list] if isinstance(gs_or_list, GuitarScore) else list(gs_or_list)
    if not parts:
        raise ValueError("write_midi: nothing to write (empty list of parts)")
    timing = timing or parts[0]
    first = timing.score
    tpq = first.ticks_per_quarter
    out = symusic.Score(tpq)
    copy_timing(first, out)
    out.markers.extend(m for m in first.markers if m.text != GENERATED_MARKER)
    generated = timing.extra.get("generated_from_tick")
    if generated is not None:
        out.markers.append(symusic.TextMeta(int(generated), GENERATED_MARKER))
    for gs in parts:
        score = gs.score if gs.score.ticks_per_quarter == tpq else gs.score.resample(tpq, min_dur=1)
        for track in score.tracks:
            track = track.copy()
            if program is not None and not track.is_drum:
                track.program = program
            if not track.name.strip() or track.name in GM_PROGRAM_NAMES:  # no name, or a default one (miditok
                track.name = program_name(track.program, track.is_drum)   # names every track it decodes a piano)
            out.tracks.append(track)
            bent = _bend_track(gs, track, score)
            if bent is not None:
                out.tracks.append(bent)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out.dump_midi(str(path))
    return path


BEND_RANGE = 4  # semitones either way, set on the companion track with RPN 0
_BEND_FULL = 8191
VIBRATO_HZ, VIBRATO_QUARTER_TONES = 5.5, 0.5


def _bend_track(gs: GuitarScore, track: symusic.Track, score: symusic.Score) -> symusic.Track | None:
    """Move `track`'s bent and vibrato notes (per `gs.techniques`, in note order) to a companion track with
    pitch-bend curves; None when the part has none. `track` is the caller's copy and loses those notes."""
    techs = gs.techniques
    notes = list(track.notes)
    if not techs or len(techs) != len(notes) or not any((t.bend or t.vibrato) and not t.dead for t in techs):
        return None
    tpq = score.ticks_per_quarter
    qpm = score.tempos[0].qpm if len(score.tempos) else 120.0
    ticks_per_s = tpq * qpm / 60.0
    bent = symusic.Track(program=track.program, name=track.name + BEND_TRACK_SUFFIX)
    for number, value in ((101, 0), (100, 0), (6, BEND_RANGE), (38, 0), (101, 127), (100, 127)):
        bent.controls.append(symusic.ControlChange(0, number, value))
    keep = []
    for note, t in zip(notes, techs):
        if (t.bend or t.vibrato) and not t.dead:
            bent.notes.append(note)
            bent.pitch_bends.extend(_curve(note, t, ticks_per_s, tpq))
        else:
            keep.append(note)
    track.notes.clear()
    track.notes.extend(keep)
    bent.pitch_bends.sort(key=lambda b: b.time)
    return bent


def _curve(note: symusic.Note, t: Technique, ticks_per_s: float, tpq: int) -> list[symusic.PitchBend]:
    """Pitch-bend events over one note: the bend's points (linear between them) plus vibrato, back to 0 at its end."""
    step = max(1, tpq // 16)
    points = list(t.bend) or [(0.0, 0.0), (1.0, 0.0)]
    if points[-1][0] < 1.0:
        points.append((1.0, points[-1][1]))
    out = []
    for tick in range(note.time, note.time + max(1, note.duration), step):
        x = (tick - note.time) / max(1, note.duration)
        k = max(i for i, (pos, _) in enumerate(points) if pos <= x or i == 0)
        (x0, a0), (x1, a1) = points[k], points[min(k + 1, len(points) - 1)]
        quarter_tones = a0 if x1 <= x0 else a0 + (a1 - a0) * (x - x0) / (x1 - x0)
        if t.vibrato:
            seconds = (tick - note.time) / ticks_per_s
            quarter_tones += VIBRATO_QUARTER_TONES * math.sin(2 * math.pi * VIBRATO_HZ * seconds)
        value = round(_BEND_FULL * quarter_tones / (2 * BEND_RANGE))
        if not out or out[-1].value != value:
            out.append(symusic.PitchBend(tick, max(-_BEND_FULL - 1, min(_BEND_FULL, value))))
    out.append(symusic.PitchBend(note.time + max(1, note.duration), 0))
    return out
