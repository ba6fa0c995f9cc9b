"""MIDI out: guitar parts as one multi-track MIDI file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import symusic

from guitarformer.music.guitar import GM_PROGRAM_NAMES, program_name
from guitarformer.music.score import GuitarScore
from guitarformer.readers.base import copy_timing

GENERATED_MARKER = "generated"  # the MIDI marker at the tick where generated bars begin


def write_midi(gs_or_list: GuitarScore | Iterable[GuitarScore], path: str | os.PathLike, program: int | None = None) -> Path:
    """Write one or several guitar parts as one MIDI file (one track each); returns the path.

    Tempos, time signatures and markers come from the first part; where its `extra["generated_from_tick"]` is set
    (a prompt continued by a model), a "generated" marker shows where the new bars begin. `program` overrides every
    track's program. A track without a name of its own is named after its instrument ("Acoustic Guitar (steel)").
    """
    parts = [gs_or_list] if isinstance(gs_or_list, GuitarScore) else list(gs_or_list)
    if not parts:
        raise ValueError("write_midi: nothing to write (empty list of parts)")
    first = parts[0].score
    tpq = first.ticks_per_quarter
    out = symusic.Score(tpq)
    copy_timing(first, out)
    out.markers.extend(m for m in first.markers if m.text != GENERATED_MARKER)
    generated = parts[0].extra.get("generated_from_tick")
    if generated is not None:
        out.markers.append(symusic.TextMeta(int(generated), GENERATED_MARKER))
    for gs in parts:
        score = gs.score if gs.score.ticks_per_quarter == tpq else gs.score.resample(tpq, min_dur=1)
        for track in score.tracks:
            track = track.copy()
            if program is not None:
                track.program = program
            if not track.name.strip() or track.name in GM_PROGRAM_NAMES:  # no name, or a default one (miditok
                track.name = program_name(track.program, track.is_drum)   # names every track it decodes a piano)
            out.tracks.append(track)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out.dump_midi(str(path))
    return path
