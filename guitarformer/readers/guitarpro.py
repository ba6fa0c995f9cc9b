"""Guitar Pro 3, 4 and 5 (PyGuitarPro): one GuitarScore per guitar track, with the tab's strings and frets."""

from __future__ import annotations

from pathlib import Path

import guitarpro
import symusic

from guitarformer.errors import SkipFile
from guitarformer.music.guitar import BASS_PROGRAMS, GUITAR_PROGRAM, TPQ
from guitarformer.music.score import GuitarScore
from guitarformer.readers.base import dedupe_by_time, new_score, part_name, time_limit

GP6_MESSAGE = "Guitar Pro 6+ (.gpx/.gp) is not supported by PyGuitarPro; export as GP5 or MIDI"
GP_QUARTER = 960  # PyGuitarPro's ticks per quarter (Duration.quarterTime)
GP_MAX_SECONDS = 60  # a corrupt file can make PyGuitarPro crawl; give up rather than hang
BEND_PER_QUARTER_TONE = 2048  # MIDI pitch-bend units per quarter tone at the default +-2 semitone range
DEAD_NOTE_TICKS = TPQ // 8  # a dead (x) note sounds as a 1/32 click
DEAD_NOTE_VELOCITY = 30


def read_gp(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    """Guitar Pro 3/4/5 through PyGuitarPro; one GuitarScore per guitar track.

    Pitch = open string + capo + fret (Guitar Pro frets, and ours, count from the capo; PyGuitarPro's
    Note.realValue leaves the capo out). Ties extend the previous note on that string; bends become
    pitch bends (+-2 semitone range, larger bends clipped); dead notes are short and soft, palm mutes
    and staccato shorter, ghost notes softer, let-ring notes last until the next note on that string.
    Repeats are not expanded; grace notes, harmonics' sounding pitch and tremolo-bar dives are ignored (harmonics
    keep the written fret's pitch; their note indices are in `extra["harmonics"]`, as the ASCII tab reader does).
    """
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:4] in (b"BCFZ", b"BCFS") or head[:2] == b"PK":
        raise SkipFile(GP6_MESSAGE)  # a GP6/7 file with a GP3-5 suffix
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

    candidates = [t for t in song.tracks if not (t.isPercussionTrack or t.channel.isPercussionChannel)]
    if tracks == "guitar":
        candidates = [t for t in candidates if _gp_role(t) == "guitar" or (include_bass and _gp_role(t) == "bass")]
    parts = []
    for track in candidates:
        gs = _gp_track(track, ticks, ticks(song_end), tempos, time_signatures)
        if gs is None:
            continue  # no notes
        gs.name = part_name(path, track.name, len(candidates))
        gs.extra["path"] = str(path)
        parts.append(gs)
    if not parts:
        if candidates:
            raise SkipFile(f"no notes in the {len(candidates)} guitar track(s) of {len(song.tracks)} tracks")
        raise SkipFile(
            f"no guitar track (6/7-string, non-percussion) among {len(song.tracks)} tracks; "
            "use --tracks all to keep every track"
        )
    return parts


def _gp_role(track) -> str:
    """'guitar' (6/7 strings), 'bass' (4/5 strings, or a 6-string bass on a bass program) or 'other'."""
    n = len(track.strings)
    if n in (4, 5) or (n == 6 and track.channel.instrument in BASS_PROGRAMS):
        return "bass"
    return "guitar" if n in (6, 7) else "other"


def _gp_track(track, ticks, end: int, tempos, time_signatures) -> GuitarScore | None:
    """One PyGuitarPro track as a GuitarScore, or None when it has no notes."""
    NoteType, BeatStatus = guitarpro.NoteType, guitarpro.BeatStatus
    strings = sorted(track.strings, key=lambda s: s.number)  # 1 = highest
    open_pitch = {s.number: s.value for s in strings}
    capo = max(0, int(track.offset or 0))
    # one row per sounding note: [time, pitch, duration, velocity, string, fret, let_ring, bend, harmonic]
    rows: list[list] = []
    sounding: dict[tuple[int, int], int] = {}  # (voice index, string) -> row of the note a tie extends
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
                    if note.type == NoteType.tie and key in sounding:
                        row = rows[sounding[key]]
                        row[2] = max(row[2], start + beat_dur - row[0])
                        continue
                    eff = note.effect
                    fret = max(0, int(note.value))
                    pitch = open_pitch[note.string] + capo + fret
                    if not 0 <= pitch <= 127:
                        continue
                    dur = max(1, round(beat_dur * (note.durationPercent or 1.0)))
                    vel = int(note.velocity or 95)
                    if note.type == NoteType.dead:
                        dur, vel = min(dur, DEAD_NOTE_TICKS), min(vel, DEAD_NOTE_VELOCITY)
                    if eff.palmMute:
                        dur, vel = max(1, dur // 2), round(vel * 0.85)
                    if eff.staccato:
                        dur = max(1, dur // 2)
                    if eff.ghostNote:
                        vel = round(vel * 0.6)
                    if eff.accentuatedNote or eff.heavyAccentuatedNote:
                        vel += 15
                    bend = eff.bend if eff.isBend else None
                    sounding[key] = len(rows)
                    rows.append([start, pitch, dur, max(1, min(127, vel)), note.string, fret, eff.letRing, bend,
                                 eff.isHarmonic])
    if not rows:
        return None

    # let ring: hold until the next note on the same string (or the end of the song)
    by_string: dict[int, list[list]] = {}
    for row in sorted(rows, key=lambda r: r[0]):
        by_string.setdefault(row[4], []).append(row)
    for same in by_string.values():
        for row, nxt in zip(same, same[1:] + [None]):
            if row[6]:
                row[2] = max(row[2], (nxt[0] if nxt is not None else end) - row[0])

    rows.sort(key=lambda r: (r[0], r[1], r[4]))
    score = new_score(TPQ, tempos, time_signatures)
    program = int(track.channel.instrument) if 0 <= track.channel.instrument <= 127 else GUITAR_PROGRAM
    out = symusic.Track(track.name or "", program, False)
    bends = []
    for start, pitch, dur, vel, _string, _fret, _ring, bend, _harmonic in rows:
        out.notes.append(symusic.Note(start, dur, pitch, vel))
        if bend is not None:
            for point in bend.points:
                t = start + round(dur * point.position / guitarpro.BendEffect.maxPosition)
                bends.append((t, max(-8192, min(8191, point.value * BEND_PER_QUARTER_TONE))))
            bends.append((start + dur, 0))  # release: the bend is channel-wide in MIDI
    for t, value in sorted(bends, key=lambda b: b[0]):
        out.pitch_bends.append(symusic.PitchBend(t, value))
    score.tracks.append(out)
    return GuitarScore(
        score=score,
        tuning=tuple(s.value for s in reversed(strings)),  # lowest string first
        capo=capo,
        frets=[(r[4], r[5]) for r in rows],
        source_format="gp",
        extra={"program": program, "track_name": track.name, "harmonics": [k for k, r in enumerate(rows) if r[8]]},
    )

