"""MIDI files (symusic): every guitar track, or the one track of a riff file whatever its program.

MIDI names no tuning and no technique; two of a guitar part's are read from what it holds:
- its tuning, from its lowest note (music.guitar.tuning_for_lowest): a part that goes down to D2 is in drop D, to
  C2 in drop C, to B1 on a 7-string, rather than fingered an octave off;
- palm mutes: a track on General MIDI's Electric Guitar (muted) program is how MIDI writes a palm-muted guitar
  part, so each of its notes is read as palm-muted.
With tracks="all", drum tracks (channel 10) are read too, as drum parts after the pitched ones.
"""

from __future__ import annotations

from pathlib import Path

import symusic

from guitarformer.music.guitar import (
    BASS_PROGRAMS,
    BASS_TUNING,
    GUITAR_PROGRAM,
    GUITAR_PROGRAMS,
    MUTED_GUITAR_PROGRAM,
    tuning_for_lowest,
)
from guitarformer.music.drums import drum_part
from guitarformer.music.score import GuitarScore, Technique
from guitarformer.readers.base import copy_timing, no_guitar, part_name


def read_midi(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    try:
        src = symusic.Score(str(path))
    except Exception as e:  # symusic raises RuntimeError/ValueError with terse messages
        raise ValueError(f"{path.name}: not a readable MIDI file ({e})") from e
    pitched = _merge_bend_tracks([t for t in src.tracks if not t.is_drum and len(t.notes)])
    if tracks == "all":
        keep = pitched
    else:
        keep = [
            t for t in pitched
            if t.program in GUITAR_PROGRAMS or (include_bass and t.program in BASS_PROGRAMS)
        ]
        # A riff file with one instrument is a guitar part whatever program it carries
        # (exported riffs often sit on program 0), unless it is a bass we were told to leave out.
        if not keep and len(pitched) == 1 and (include_bass or pitched[0].program not in BASS_PROGRAMS):
            keep = pitched
    drums = [t for t in src.tracks if t.is_drum and len(t.notes)] if tracks == "all" else []
    if not keep and not drums:
        raise no_guitar(len(src.tracks), tracks, pitched=len(pitched))
    n_parts = len(keep) + len(drums)

    parts = []
    for track in keep:
        score = symusic.Score(src.ticks_per_quarter)
        copy_timing(src, score)
        track = track.copy()
        is_bass = track.program in BASS_PROGRAMS
        original_program = track.program
        if tracks == "guitar" and not is_bass and track.program not in GUITAR_PROGRAMS:
            track.program = GUITAR_PROGRAM  # the single-track riff kept above
        track.notes.sort(key=lambda n: (n.time, n.pitch))
        score.tracks.append(track)
        lowest = min((n.pitch for n in track.notes), default=127)
        muted = original_program == MUTED_GUITAR_PROGRAM and not is_bass
        parts.append(GuitarScore(
            score=score,
            tuning=BASS_TUNING if is_bass else tuning_for_lowest(lowest),
            techniques=[PALM_MUTED] * len(track.notes) if muted else None,
            name=part_name(path, track.name, n_parts),
            source_format="midi",
            extra={"path": str(path), "track_name": track.name, "program": original_program},
        ))
    for track in drums:
        score = symusic.Score(src.ticks_per_quarter)
        copy_timing(src, score)
        hits = track.notes.numpy()
        parts.append(drum_part(list(zip(hits["time"], hits["duration"], hits["pitch"], hits["velocity"])), score,
                               track.name, "midi", {"path": str(path)}))
        parts[-1].name = part_name(path, track.name, n_parts)
    return parts


PALM_MUTED = Technique(palm_mute=True)
BEND_TRACK_SUFFIX = " (bends)"  # render.midi writes a part's bent and vibrato notes to such a companion track


def _merge_bend_tracks(tracks: list[symusic.Track]) -> list[symusic.Track]:
    """Put a companion "<name> (bends)" track's notes back into the "<name>" track of the same program (MIDI bends
    a whole channel, so our MIDI out plays bent notes on a track of their own): one guitar part reads back as one."""
    out: list[symusic.Track] = []
    for t in tracks:
        base = next((o for o in out if t.name.endswith(BEND_TRACK_SUFFIX) and o.program == t.program
                     and o.name == t.name[:-len(BEND_TRACK_SUFFIX)]), None)
        if base is None:
            out.append(t)
            continue
        merged = base.copy()
        merged.notes.extend(t.notes)
        out[out.index(base)] = merged
    return out
