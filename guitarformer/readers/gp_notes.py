"""What both Guitar Pro readers (GP3-5 and GP6-8) do with a note once it is read, so they sound alike.

A note's techniques shape how it sounds in MIDI (base.sounding: dead notes are short soft clicks, palm mutes and
staccato shorter, ...), let-ring notes last until the next note on their string, and bends become pitch bends
(base.add_pitch_bends). The techniques themselves are kept, one Technique per note, in the GuitarScore.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import symusic

from guitarformer.music.guitar import BASS_PROGRAMS, GUITAR_PROGRAM, GUITAR_PROGRAMS, TPQ
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.readers.base import add_pitch_bends, new_score

DEFAULT_VELOCITY = 95  # Guitar Pro's forte
# Guitar Pro's dynamics as MIDI velocities (ppp = 15, then +16 per step; GP3-5 files store these numbers).
DYNAMICS = {name: 15 + 16 * k for k, name in enumerate(("PPP", "PP", "P", "MP", "MF", "F", "FF", "FFF"))}
HARMONIC_KINDS = ("natural", "artificial", "tap", "pinch", "semi")  # GP3-5's harmonic types 1-5, in order


class Row:
    """One sounding note while a reader collects them (mutable: ties and let ring lengthen it)."""

    __slots__ = ("time", "pitch", "duration", "velocity", "string", "fret", "technique")

    def __init__(self, time: int, pitch: int, duration: int, velocity: int, string: int, fret: int,
                 technique: Technique):
        self.time, self.pitch, self.duration, self.velocity = time, pitch, duration, velocity
        self.string, self.fret, self.technique = string, fret, technique


def extend_tie(row: Row, end: int, hopo_from: set, key, hammer_out: bool) -> None:
    """A tied note: lengthen the note it continues to `end`; the tie's own hammer-on mark (to the next note on
    the string) replaces the one the first note carried. Both Guitar Pro readers tie notes this way."""
    row.duration = max(row.duration, end - row.time)
    hopo_from.discard(key)
    if hammer_out:
        hopo_from.add(key)


GP_GUITAR = "6-8 strings, guitar program, not percussion"  # what a Guitar Pro guitar track is (gp_role)


def gp_role(strings: int, program: int, percussion: bool, instrument: str = "") -> str:
    """'guitar', 'bass', 'drums' or 'other' for a Guitar Pro track, the same way for every version.

    A guitar has 6-8 strings and a guitar program (24-31): Guitar Pro gives voices, keyboards, strings and
    winds six "strings" too, and GP3-5 tells them apart only by their program. GP6-8 also name the
    instrument (`instrument`: "steelGuitar", "e-gtr6", "acousticPiano", ...); a named non-guitar is not one.
    """
    if percussion:
        return "drums"
    kind = instrument.lower()
    if "bass" in kind or (not kind and (strings in (4, 5) or program in BASS_PROGRAMS)):
        return "bass" if 4 <= strings <= 6 else "other"
    if 6 <= strings <= 8 and program in GUITAR_PROGRAMS and (not kind or "guitar" in kind or "gtr" in kind):
        return "guitar"
    return "other"


@dataclass(frozen=True)
class SongClock:
    """What every part of a song shares: its tempo changes and time signatures (as base.new_score takes them) and
    its end tick (where a let-ring note on a string with no later note stops)."""

    tempos: Sequence[tuple[int, float]] = ()  # empty: 120 quarters a minute
    time_signatures: Sequence[tuple[int, int, int]] = ()  # empty: 4/4
    end: int = 0


@dataclass(frozen=True)
class PartSetup:
    """One track's instrument as its GuitarScore records it. `keep_frets`: whether the rows' (string, fret) pairs are
    the tab's (a staff without strings has pitches only)."""

    tuning: tuple[int, ...]
    capo: int = 0
    program: int = GUITAR_PROGRAM
    track_name: str = ""
    source_format: str = "gp"
    keep_frets: bool = True


def build_part(rows: list[Row], setup: PartSetup, clock: SongClock) -> GuitarScore:
    """The GuitarScore of one track's rows: let ring applied, notes sorted by (time, pitch, string)."""
    tuning, capo, program, track_name = setup.tuning, setup.capo, setup.program, setup.track_name
    end = clock.end
    by_string: dict[int, list[Row]] = {}
    for row in sorted(rows, key=lambda r: r.time):
        by_string.setdefault(row.string, []).append(row)
    for same in by_string.values():  # let ring: hold until the next note on the string (or the song's end)
        for row, nxt in zip(same, same[1:] + [None]):
            if row.technique.let_ring:
                row.duration = max(row.duration, (nxt.time if nxt is not None else end) - row.time)

    rows = sorted(rows, key=lambda r: (r.time, r.pitch, r.string))
    score = new_score(TPQ, clock.tempos, clock.time_signatures)
    out = symusic.Track(track_name or "", program, False)
    columns = np.array([(r.time, r.duration, r.pitch, r.velocity) for r in rows], dtype=np.int32).reshape(-1, 4)
    out.notes = symusic.Note.from_numpy(columns[:, 0], columns[:, 1], columns[:, 2].astype(np.int8),
                                        columns[:, 3].astype(np.int8), "tick")
    add_pitch_bends(out, [(r.time, r.duration, r.technique.bend) for r in rows if r.technique.bend])
    score.tracks.append(out)
    return GuitarScore(
        score=score,
        tuning=tuning,
        capo=capo,
        frets=[(r.string, r.fret) for r in rows] if setup.keep_frets else None,
        techniques=[r.technique for r in rows],
        source_format=setup.source_format,
        extra={"program": program, "track_name": track_name},
    )


__all__ = ["PLAIN", "PartSetup", "Row", "SongClock", "build_part", "gp_role"]
