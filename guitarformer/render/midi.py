"""MIDI out: guitar parts as one multi-track MIDI file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import symusic

from guitarformer.music.score import GuitarScore
from guitarformer.readers.base import copy_timing


def write_midi(gs_or_list: GuitarScore | Iterable[GuitarScore], path: str | os.PathLike, program: int | None = None) -> Path:
    """Write one or several guitar parts as one MIDI file (one track each); returns the path.

    Tempos and time signatures come from the first part. `program` overrides every track's program.
    """
    parts = [gs_or_list] if isinstance(gs_or_list, GuitarScore) else list(gs_or_list)
    if not parts:
        raise ValueError("write_midi: nothing to write (empty list of parts)")
    tpq = parts[0].score.ticks_per_quarter
    out = symusic.Score(tpq)
    copy_timing(parts[0].score, out)
    for gs in parts:
        score = gs.score if gs.score.ticks_per_quarter == tpq else gs.score.resample(tpq, min_dur=1)
        for track in score.tracks:
            track = track.copy()
            if program is not None:
                track.program = program
            out.tracks.append(track)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out.dump_midi(str(path))
    return path
