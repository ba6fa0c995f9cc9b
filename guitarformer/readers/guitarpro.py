"""Guitar Pro 3, 4 and 5 (PyGuitarPro): one GuitarScore per guitar track, with the tab's strings, frets and
each note's techniques; with tracks="all" every other track too, a percussion track as a drum part (a percussion
note's fret value is its General MIDI drum key)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import guitarpro

from guitarformer.music.drums import drum_part
from guitarformer.music.guitar import GUITAR_PROGRAM, TPQ
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.readers.base import (dedupe_by_time, new_score, no_guitar, no_notes, part_name, sounding,
                                       time_limit)
from guitarformer.readers.gp_notes import (GP_GUITAR, HARMONIC_KINDS, PartSetup, Row, SongClock, build_part, extend_tie,
                                           gp_role)

GP_QUARTER = guitarpro.Duration.quarterTime  # PyGuitarPro's ticks per quarter (960)
GP_MAX_SECONDS = 60  # a corrupt file can make PyGuitarPro crawl; give up rather than hang
_SLIDES_IN = {guitarpro.SlideType.intoFromBelow: "below", guitarpro.SlideType.intoFromAbove: "above"}
_SLIDES_OUT = {guitarpro.SlideType.shiftSlideTo: "shift", guitarpro.SlideType.legatoSlideTo: "legato",
               guitarpro.SlideType.outDownwards: "down", guitarpro.SlideType.outUpwards: "up"}


def read_gp(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    """Guitar Pro 3/4/5 through PyGuitarPro; one GuitarScore per guitar track.

    Pitch = open string + capo + fret (Guitar Pro frets, and ours, count from the capo; PyGuitarPro's
    Note.realValue leaves the capo out). Ties extend the previous note on that string; grace notes are short
    notes before their note (or on its beat, delaying it); techniques are kept per note and shape the sound as
    in gp_notes (bends as pitch bends, dead and palm-muted notes short, ...). A guitar track has 6-7 strings
    and a guitar program (24-31): GP3-5 files mark voices, keyboards and winds only by their program.
    Repeats are not expanded; harmonics keep the written fret's pitch; tremolo-bar dives are ignored.
    """
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:4] in (b"BCFZ", b"BCFS") or head[:2] == b"PK":
        raise ValueError(f"{path.name}: a Guitar Pro 6-8 file, not GP3-5; read it through read_guitar")
    try:
        with time_limit(GP_MAX_SECONDS, path):
            song = guitarpro.parse(str(path))
    except TimeoutError:
        raise
    except Exception as e:  # GPException, struct.error, ValueError, ... from truncated or garbled data
        raise ValueError(f"{path.name}: not a readable Guitar Pro file ({type(e).__name__}: {e})") from e

    origin = song.measureHeaders[0].start if song.measureHeaders else GP_QUARTER
    song_end = song.measureHeaders[-1].end if song.measureHeaders else origin

    def ticks(gp_time) -> int:
        return round((gp_time - origin) * TPQ / GP_QUARTER)

    tempos = [(0, float(song.tempo) if song.tempo and song.tempo > 0 else 120.0)]
    for track in song.tracks:  # tempo changes live in mix-table events of any track
        for measure in track.measures:
            for voice in measure.voices:
                for beat in voice.beats:
                    mix = beat.effect.mixTableChange if beat.effect else None
                    if mix is not None and mix.tempo is not None and mix.tempo.value > 0:
                        tempos.append((ticks(beat.start), float(mix.tempo.value)))
    time_signatures, last = [], None
    for header in song.measureHeaders:
        sig = (header.timeSignature.numerator, header.timeSignature.denominator.value)
        if sig != last:
            time_signatures.append((ticks(header.start), *sig))
            last = sig
    tempos, time_signatures = dedupe_by_time(tempos), dedupe_by_time(time_signatures)
    clock = SongClock(tempos, time_signatures, ticks(song_end))

    roles = [_gp_role(t) for t in song.tracks]
    candidates = [(t, role) for t, role in zip(song.tracks, roles)
                  if tracks == "all" or role == "guitar" or (include_bass and role == "bass")]
    parts = []
    for track, role in candidates:
        rows = _track_rows(track, ticks, drums=role == "drums")
        if not rows:
            continue
        if role == "drums":
            gs = drum_part([(r.time, r.duration, r.pitch, r.velocity) for r in rows],
                           new_score(TPQ, tempos, time_signatures), track.name, "gp")
        else:
            strings = sorted(track.strings, key=lambda s: s.number)  # 1 = highest
            program = int(track.channel.instrument) if 0 <= track.channel.instrument <= 127 else GUITAR_PROGRAM
            setup = PartSetup(tuple(s.value for s in reversed(strings)), max(0, int(track.offset or 0)), program,
                              track.name, "gp")
            gs = build_part(rows, setup, clock)
        gs.name = part_name(path, track.name, len(candidates))
        gs.extra.update(path=str(path), role=role)
        parts.append(gs)
    if not parts:
        if candidates:
            raise no_notes(len(candidates), len(song.tracks), tracks)
        raise no_guitar(len(song.tracks), tracks, GP_GUITAR, pitched=sum(r != "drums" for r in roles))
    return parts


def _gp_role(track) -> str:
    percussion = track.isPercussionTrack or track.channel.isPercussionChannel
    return gp_role(len(track.strings), int(track.channel.instrument), percussion)


@dataclass(frozen=True)
class _Marks:
    """How a note is played beyond its technique: staccato, accented, and whether it hammers/pulls to the next note
    on its string."""

    staccato: bool = False
    accent: bool = False
    hopo: bool = False


def _track_rows(track, ticks, drums: bool = False) -> list[Row]:
    """The sounding notes of one PyGuitarPro track (`drums`: a percussion track, whose fret values are drum keys)."""
    NoteType, BeatStatus = guitarpro.NoteType, guitarpro.BeatStatus
    open_pitch = {s.number: s.value for s in track.strings}
    capo = max(0, int(track.offset or 0))
    rows: list[Row] = []
    sounding_rows: dict[tuple[int, int], Row] = {}  # (voice index, string) -> the note a tie extends
    hopo_from: set[tuple[int, int]] = set()  # (voice index, string) whose last note hammers/pulls to the next

    def place(v, string, fret, start, duration, velocity, tech, marks=_Marks()):
        key = (v, string)
        if key in hopo_from:
            tech = replace(tech, hammer=True)
            hopo_from.discard(key)
        if marks.hopo:
            hopo_from.add(key)
        pitch = fret if drums else open_pitch[string] + capo + fret
        if not 0 <= pitch <= 127:
            return
        dur, vel = sounding(duration, velocity, tech, marks.staccato, marks.accent)
        row = Row(start, pitch, dur, vel, string, fret, tech)
        rows.append(row)
        sounding_rows[key] = row

    for measure in track.measures:
        for v, voice in enumerate(measure.voices):
            for beat in voice.beats:
                if beat.status != BeatStatus.normal or not beat.notes:
                    continue
                start = ticks(beat.start)
                beat_dur = max(1, round(beat.duration.time * TPQ / GP_QUARTER))
                for note in beat.notes:
                    if note.string not in open_pitch or note.type == NoteType.rest:
                        continue
                    key = (v, note.string)
                    eff = note.effect
                    if note.type == NoteType.tie and key in sounding_rows:
                        extend_tie(sounding_rows[key], start + beat_dur, hopo_from, key, eff.hammer)
                        continue
                    shift = 0
                    if eff.grace is not None:
                        shift = _grace(eff.grace, v, note.string, start, place)
                    marks = _Marks(eff.staccato, eff.accentuatedNote or eff.heavyAccentuatedNote, eff.hammer)
                    place(v, note.string, max(0, int(note.value)), start + shift, max(1, beat_dur - shift),
                          int(note.velocity or 95), _technique(note, beat), marks)
    return rows


def _grace(grace, v: int, string: int, start: int, place) -> int:
    """Place a grace note before its note (or on the beat); returns how late the note itself starts."""
    length = max(1, round(grace.durationTime * TPQ / GP_QUARTER))
    on_beat = grace.isOnBeat or start - length < 0
    tech = Technique(dead=True) if grace.isDead else PLAIN
    hopo = grace.transition == guitarpro.GraceEffectTransition.hammer
    if grace.transition == guitarpro.GraceEffectTransition.slide:
        tech = replace(tech, slide_out="legato")
    place(v, string, max(0, int(grace.fret)), start if on_beat else start - length, length, int(grace.velocity),
          tech, _Marks(hopo=hopo))
    return length if on_beat else 0


def _technique(note, beat) -> Technique:
    eff = note.effect
    found = {}
    if eff.isBend:
        max_position = guitarpro.BendEffect.maxPosition
        found["bend"] = tuple((round(p.position / max_position, 4), float(p.value)) for p in eff.bend.points)
        if not any(a for _, a in found["bend"]):
            del found["bend"]
    for slide in eff.slides:
        if slide in _SLIDES_IN:
            found.setdefault("slide_in", _SLIDES_IN[slide])
        elif slide in _SLIDES_OUT:
            found.setdefault("slide_out", _SLIDES_OUT[slide])
    if eff.palmMute:
        found["palm_mute"] = True
    if note.type == guitarpro.NoteType.dead:
        found["dead"] = True
    if eff.ghostNote:
        found["ghost"] = True
    if eff.harmonic is not None:
        kind = getattr(eff.harmonic, "type", 1)
        found["harmonic"] = HARMONIC_KINDS[kind - 1] if 1 <= kind <= len(HARMONIC_KINDS) else "natural"
    if eff.vibrato or (beat.effect is not None and beat.effect.vibrato):
        found["vibrato"] = True
    if eff.letRing:
        found["let_ring"] = True
    if beat.effect is not None and beat.effect.slapEffect == guitarpro.SlapEffect.tapping:
        found["tap"] = True
    return Technique(**found) if found else PLAIN
