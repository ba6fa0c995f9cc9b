"""Read guitar parts from MIDI, Guitar Pro 3-5, ASCII tab, MusicXML and ABC files; write them back as MIDI.

Every reader returns a list of GuitarScore (one per guitar part). A file that is readable but not
usable (no guitar part, a format we cannot read) raises SkipFile(reason); corrupt data raises an
ordinary exception whose message names the file and the problem, so `prepare` can record it.

Conventions shared by the readers:
- Time is in ticks. GP and music21 sources are written at TPQ=480; MIDI keeps its own TPQ.
- Each GuitarScore holds one track plus the song's tempos and time signatures (a 120 BPM, 4/4
  default is written when the source has none, which is what MIDI assumes anyway).
- Notes are sorted by (time, pitch); `frets`, where the source knows it, follows that order.
- Repeats are not expanded: a score plays straight through once, as written.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

import symusic

from guitarformer.data.score import GUITAR_PROGRAM, STANDARD_TUNING, TUNINGS, GuitarScore
from guitarformer.errors import SkipFile

FORMATS: dict[str, str] = {
    ".mid": "midi",
    ".midi": "midi",
    ".gp3": "gp",
    ".gp4": "gp",
    ".gp5": "gp",
    ".gpx": "gp6+",
    ".gp": "gp6+",
    ".txt": "ascii_tab",
    ".tab": "ascii_tab",
    ".musicxml": "musicxml",
    ".xml": "musicxml",
    ".mxl": "musicxml",
    ".abc": "abc",
}

TPQ = 480  # ticks per quarter for everything we build ourselves (GP, music21)
GUITAR_PROGRAMS = range(24, 32)  # General MIDI guitars, 0-based
BASS_PROGRAMS = range(32, 40)
BASS_TUNING: tuple[int, ...] = (28, 33, 38, 43)  # E1 A1 D2 G2
DEFAULT_VELOCITY = 80
M21_MAX_SECONDS = 120  # music21 is slow on big scores; a stuck parse is reported, not waited on
GP6_MESSAGE = "Guitar Pro 6+ (.gpx/.gp) is not supported by PyGuitarPro; export as GP5 or MIDI"
# Sanity bounds: a real guitar file is well under a few MB and a few hours long. A 3 KB MIDI whose
# delta times jump by 2^28 ticks would otherwise tokenize into hundreds of millions of Bar tokens.
MAX_FILE_BYTES = 64 << 20
MAX_QUARTERS = 100_000  # about 14 hours at 120 BPM
_TRACK_CHOICES = ("guitar", "all")


def detect_format(path: str | os.PathLike) -> str | None:
    """Format name for a path from its suffix (case-insensitive), or None if we do not read it."""
    return FORMATS.get(Path(path).suffix.lower())


def read_guitar(path: str | os.PathLike, tracks: str = "guitar", include_bass: bool = False) -> list[GuitarScore]:
    """Read every guitar part of a file.

    tracks="guitar" keeps guitar parts only (plus bass when include_bass); tracks="all" keeps every
    pitched (non-drum) part. Raises SkipFile for a usable-but-not-guitar or unsupported file.
    """
    if tracks not in _TRACK_CHOICES:
        raise ValueError(f"tracks must be one of {_TRACK_CHOICES}, not {tracks!r}")
    path = Path(path)
    fmt = detect_format(path)
    if fmt is None:
        raise SkipFile(f"unsupported file type {path.suffix!r}; readable: {', '.join(sorted(FORMATS))}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if fmt == "gp6+":
        raise SkipFile(GP6_MESSAGE)
    size = path.stat().st_size
    if size == 0:
        raise SkipFile("empty file (0 bytes)")
    if size > MAX_FILE_BYTES:
        raise SkipFile(f"file too large ({size / 2**20:.0f} MB > {MAX_FILE_BYTES >> 20} MB); "
                       "split it or convert it to MIDI")
    if fmt == "ascii_tab":
        from guitarformer.data.ascii_tab import read_ascii_tab  # lazy: written alongside this module

        parts = read_ascii_tab(path)
    else:
        reader = {"midi": _read_midi, "gp": _read_gp, "musicxml": _read_music21, "abc": _read_music21}[fmt]
        parts = reader(path, tracks=tracks, include_bass=include_bass)
    for gs in parts:
        quarters = gs.score.end() / max(1, gs.score.ticks_per_quarter)
        if quarters > MAX_QUARTERS:
            raise ValueError(f"{path.name}: implausible length ({quarters:,.0f} quarter notes > {MAX_QUARTERS:,}); "
                             "corrupt timing data?")
    return parts


def write_midi(gs_or_list: GuitarScore | Iterable[GuitarScore], path: str | os.PathLike, program: int | None = None) -> Path:
    """Write one or several guitar parts as one MIDI file (one track each); returns the path.

    Tempos and time signatures come from the first part. `program` overrides every track's program.
    """
    parts = [gs_or_list] if isinstance(gs_or_list, GuitarScore) else list(gs_or_list)
    if not parts:
        raise ValueError("write_midi: nothing to write (empty list of parts)")
    tpq = parts[0].score.ticks_per_quarter
    out = symusic.Score(tpq)
    _copy_timing(parts[0].score, out)
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


# ---------------------------------------------------------------------------------------------
# shared helpers


def _copy_timing(src: symusic.Score, dst: symusic.Score) -> None:
    """Copy tempos and time signatures (src and dst share a TPQ), with MIDI's defaults if absent."""
    dst.tempos.extend(src.tempos.copy() if len(src.tempos) else [symusic.Tempo(0, 120.0)])
    if len(src.time_signatures):
        dst.time_signatures.extend(src.time_signatures.copy())
    else:
        dst.time_signatures.append(symusic.TimeSignature(0, 4, 4))


def _new_score(tpq: int, tempos: list[tuple[int, float]], time_signatures: list[tuple[int, int, int]]) -> symusic.Score:
    score = symusic.Score(tpq)
    for time, qpm in tempos or [(0, 120.0)]:
        score.tempos.append(symusic.Tempo(time, float(qpm)))
    for time, num, den in time_signatures or [(0, 4, 4)]:
        score.time_signatures.append(symusic.TimeSignature(time, num, den))
    return score


def _part_name(path: Path, track_name: str, n_parts: int) -> str:
    track_name = track_name.strip()
    return f"{path.stem} [{track_name}]" if track_name and n_parts > 1 else path.stem


def _no_guitar(n_tracks: int) -> SkipFile:
    return SkipFile(
        f"no guitar track (programs 24-31) among {n_tracks} tracks; use --tracks all to keep every track"
    )


@contextmanager
def _time_limit(seconds: float, path: Path):
    """Raise TimeoutError after `seconds` (SIGALRM).

    A no-op off the main thread, without SIGALRM, or when the caller already armed a timer
    (prepare does, per file): then the caller's limit is the one that counts.
    """
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"{path.name}: gave up reading after {seconds:g} s (corrupt or pathological file?)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------------------------
# MIDI (symusic)


def _read_midi(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    try:
        src = symusic.Score(str(path))
    except Exception as e:  # symusic raises RuntimeError/ValueError with terse messages
        raise ValueError(f"{path.name}: not a readable MIDI file ({e})") from e
    pitched = [t for t in src.tracks if not t.is_drum and len(t.notes)]
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
    if not keep:
        raise _no_guitar(len(src.tracks))

    parts = []
    for track in keep:
        score = symusic.Score(src.ticks_per_quarter)
        _copy_timing(src, score)
        track = track.copy()
        is_bass = track.program in BASS_PROGRAMS
        original_program = track.program
        if tracks == "guitar" and not is_bass and track.program not in GUITAR_PROGRAMS:
            track.program = GUITAR_PROGRAM  # the single-track riff kept above
        track.notes.sort(key=lambda n: (n.time, n.pitch))
        score.tracks.append(track)
        parts.append(GuitarScore(
            score=score,
            tuning=BASS_TUNING if is_bass else STANDARD_TUNING,
            name=_part_name(path, track.name, len(keep)),
            source_format="midi",
            extra={"path": str(path), "track_name": track.name, "program": original_program},
        ))
    return parts


# ---------------------------------------------------------------------------------------------
# Guitar Pro 3/4/5 (PyGuitarPro)


GP_QUARTER = 960  # PyGuitarPro's ticks per quarter (Duration.quarterTime)
GP_MAX_SECONDS = 60  # a corrupt file can make PyGuitarPro crawl; give up rather than hang
BEND_PER_QUARTER_TONE = 2048  # MIDI pitch-bend units per quarter tone at the default +-2 semitone range
DEAD_NOTE_TICKS = TPQ // 8  # a dead (x) note sounds as a 1/32 click
DEAD_NOTE_VELOCITY = 30


def _read_gp(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    """Guitar Pro 3/4/5 through PyGuitarPro; one GuitarScore per guitar track.

    Pitch = open string + capo + fret (Guitar Pro frets, and ours, count from the capo; PyGuitarPro's
    Note.realValue leaves the capo out). Ties extend the previous note on that string; bends become
    pitch bends (+-2 semitone range, larger bends clipped); dead notes are short and soft, palm mutes
    and staccato shorter, ghost notes softer, let-ring notes last until the next note on that string.
    Repeats are not expanded; grace notes, harmonics' sounding pitch and tremolo-bar dives are ignored (harmonics
    keep the written fret's pitch; their note indices are in `extra["harmonics"]`, as the ASCII tab reader does).
    """
    import guitarpro

    with open(path, "rb") as f:
        head = f.read(4)
    if head[:4] in (b"BCFZ", b"BCFS") or head[:2] == b"PK":
        raise SkipFile(GP6_MESSAGE)  # a GP6/7 file with a GP3-5 suffix
    try:
        with _time_limit(GP_MAX_SECONDS, path):
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
    tempos, time_signatures = _dedupe_by_time(tempos), _dedupe_by_time(time_signatures)

    candidates = [t for t in song.tracks if not (t.isPercussionTrack or t.channel.isPercussionChannel)]
    if tracks == "guitar":
        candidates = [t for t in candidates if _gp_role(t) == "guitar" or (include_bass and _gp_role(t) == "bass")]
    parts = []
    for track in candidates:
        gs = _gp_track(track, ticks, ticks(song_end), tempos, time_signatures)
        if gs is None:
            continue  # no notes
        gs.name = _part_name(path, track.name, len(candidates))
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
    import guitarpro

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
    score = _new_score(TPQ, tempos, time_signatures)
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


# ---------------------------------------------------------------------------------------------
# MusicXML / ABC (music21)


def _read_music21(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    import music21  # heavy; only when a MusicXML/ABC file is read

    if path.suffix.lower() in (".xml", ".musicxml"):
        with open(path, "rb") as f:
            head = f.read(4096)
        if b"<GPIF" in head:
            raise SkipFile("Guitar Pro 6+ internal XML (GPIF) is not MusicXML; export as GP5, MusicXML or MIDI")
        if b"score-partwise" not in head and b"score-timewise" not in head:
            raise SkipFile("XML file is not MusicXML (no score-partwise/score-timewise root)")
    fmt = "abc" if path.suffix.lower() == ".abc" else "musicxml"
    try:
        with _time_limit(M21_MAX_SECONDS, path):
            parsed = music21.converter.parse(str(path), format=fmt)
    except TimeoutError:
        raise
    except Exception as e:
        raise ValueError(f"{path.name}: music21 could not parse it as {fmt} ({type(e).__name__}: {e})") from e
    scores = list(parsed.scores) if isinstance(parsed, music21.stream.Opus) else [parsed]
    parts: list[GuitarScore] = []
    n_parts = 0
    for i, sc in enumerate(scores):
        title = (sc.metadata.title if sc.metadata and sc.metadata.title else "") or ""
        name = title or (f"{path.stem} #{i + 1}" if len(scores) > 1 else path.stem)
        try:
            got = from_music21(sc, name=name, tracks=tracks, include_bass=include_bass, source_format=fmt)
        except SkipFile:
            if len(scores) == 1:
                raise
            continue  # one non-guitar tune in an opus does not spoil the others
        n_parts += len(sc.parts)
        for gs in got:
            gs.extra["path"] = str(path)
        parts.extend(got)
    if not parts:
        raise _no_guitar(n_parts)
    return parts


def _m21_role(part) -> str:
    """'guitar', 'bass', 'drums' or 'other' for a music21 Part, from its instrument and name."""
    from music21 import instrument

    inst = part.getInstrument(returnDefault=False)
    names = " ".join(
        str(x or "") for x in (part.partName, getattr(inst, "instrumentName", None), getattr(inst, "partName", None))
    ).lower()
    program = getattr(inst, "midiProgram", None)
    if isinstance(inst, instrument.UnpitchedPercussion) or getattr(inst, "midiChannel", None) == 9:
        return "drums"
    if isinstance(inst, (instrument.ElectricBass, instrument.AcousticBass, instrument.FretlessBass)) or "bass" in names:
        return "bass"
    if isinstance(inst, instrument.Guitar) or "guitar" in names or "gtr" in names or "guit" in names:
        return "guitar"
    if program is not None and program in GUITAR_PROGRAMS:
        return "guitar"
    if program is not None and program in BASS_PROGRAMS:
        return "bass"
    return "other"


def from_music21(
    m21score,
    name: str = "",
    tracks: str = "guitar",
    include_bass: bool = False,
    source_format: str = "music21",
) -> list[GuitarScore]:
    """Guitar parts of a music21 Score (or a lone Part) as GuitarScores at TPQ=480.

    Picks parts whose instrument is a guitar (or the only part); tracks="all" keeps every pitched
    part. Pitches are sounding pitches: `toSoundingPitch()` applies the part's transposition when the
    source encodes written pitch (MusicXML <transpose>). music21's Guitar instrument itself carries
    no octave transposition, and MusicXML guitar parts normally encode sounding pitch (treble-8vb
    clef, or TAB staves whose pitch = string tuning + fret), so no extra octave shift is applied.
    Ties are merged (stripTies), chords become simultaneous notes, a note two voices share is kept
    once (the longest), grace notes and chord symbols are dropped, repeats are not expanded.
    """
    from music21 import harmony, meter, stream, tempo

    if tracks not in _TRACK_CHOICES:
        raise ValueError(f"tracks must be one of {_TRACK_CHOICES}, not {tracks!r}")
    all_parts = list(m21score.parts) if hasattr(m21score, "parts") and len(m21score.parts) else [m21score]
    roles = [_m21_role(p) for p in all_parts]
    pitched = [(p, r) for p, r in zip(all_parts, roles) if r != "drums"]
    if tracks == "all":
        keep = pitched
    else:
        keep = [(p, r) for p, r in pitched if r == "guitar" or (include_bass and r == "bass")]
        if not keep and len(pitched) == 1 and (include_bass or pitched[0][1] != "bass"):
            keep = pitched
    if not keep:
        raise _no_guitar(len(all_parts))

    # Tempo map from the whole score (ABC and many MusicXML files put it in one part only).
    tempos: list[tuple[int, float]] = []
    try:
        for start, _end, mm in m21score.metronomeMarkBoundaries():
            qpm = mm.getQuarterBPM()
            if qpm and qpm > 0:
                tempos.append((round(float(start) * TPQ), float(qpm)))
    except Exception:  # odd MetronomeMarks (text only) should not lose the notes
        tempos = []
    tempos = _dedupe_by_time(tempos) or [(0, 120.0)]

    out = []
    for part, role in keep:
        if part.atSoundingPitch is False or part.atSoundingPitch == "unknown":
            part = part.toSoundingPitch(inPlace=False)
        flat = part.flatten().stripTies(inPlace=False)
        time_signatures = _dedupe_by_time([
            (round(float(ts.offset) * TPQ), int(ts.numerator), int(ts.denominator))
            for ts in flat.getElementsByClass(meter.TimeSignature)
        ])
        raw = []
        for el in flat.notes:
            if isinstance(el, harmony.Harmony) or el.duration.isGrace:
                continue  # chord symbols are annotations, not notes
            start = round(float(el.offset) * TPQ)
            dur = max(1, round(float(el.quarterLength) * TPQ))
            vel = el.volume.velocity if el.volume is not None and el.volume.velocity else DEFAULT_VELOCITY
            for midi, sf in _m21_pitches_with_frets(el):
                if 0 <= midi <= 127:
                    raw.append((start, midi, dur, int(vel), sf))
        if not raw:
            continue
        # Two voices sharing a note (common in notation) would be two overlapping MIDI notes of one
        # pitch; keep the longest.
        longest: dict[tuple[int, int], tuple] = {}
        for note in raw:
            if note[:2] not in longest or note[2] > longest[note[:2]][2]:
                longest[note[:2]] = note
        raw = sorted(longest.values(), key=lambda n: n[:4])
        is_bass = role == "bass"
        tuning, frets = _tab_tuning_and_frets(raw, BASS_TUNING if is_bass else STANDARD_TUNING)
        score = _new_score(TPQ, tempos, time_signatures)
        inst = part.getInstrument(returnDefault=False)
        program = getattr(inst, "midiProgram", None)
        if tracks == "guitar" and not is_bass and (program is None or program not in GUITAR_PROGRAMS):
            program = GUITAR_PROGRAM
        track = symusic.Track(str(part.partName or name or ""), int(program if program is not None else 0), False)
        for start, pitch, dur, vel, _sf in raw:
            track.notes.append(symusic.Note(start, dur, pitch, vel))
        score.tracks.append(track)
        part_label = str(part.partName or "")
        out.append(GuitarScore(
            score=score,
            tuning=tuning,
            frets=frets,
            name=f"{name} [{part_label}]" if part_label and len(keep) > 1 else name,
            source_format=source_format,
            extra={"part_name": part_label},
        ))
    if not out:
        raise SkipFile(f"guitar part(s) of {name or 'score'} hold no notes")
    return out


def _m21_pitches_with_frets(el) -> list[tuple[int, tuple[int, int] | None]]:
    """(MIDI pitch, (string, fret) or None) for each pitch of a music21 note or chord. MusicXML TAB staves
    (and tab-aware notation) carry <technical><string>/<fret>, which music21 keeps as articulations: on each
    note of a chord, or gathered on the chord itself in note order."""
    from music21 import articulations

    def pairs(arts) -> list[tuple[int, int]]:
        """(string, fret) pairs in order; each pair's two marks may come in either order."""
        out, st, fr = [], None, None
        for a in arts:
            if isinstance(a, articulations.StringIndication):
                st = a.number
            elif isinstance(a, articulations.FretIndication):
                fr = a.number
            if isinstance(st, int) and isinstance(fr, int):
                out.append((st, fr))
                st = fr = None
        return out if all(s >= 1 and f >= 0 for s, f in out) else []

    notes = list(getattr(el, "notes", ()))
    if not notes:
        own = pairs(getattr(el, "articulations", ()))
        return [(int(p.midi), own[0] if len(own) == 1 else None) for p in getattr(el, "pitches", ())]
    per_note = [pairs(getattr(n, "articulations", ())) for n in notes]
    sfs = [p[0] if len(p) == 1 else None for p in per_note]
    if all(sf is None for sf in sfs):
        on_chord = pairs(getattr(el, "articulations", ()))
        if len(on_chord) == len(notes):
            sfs = list(on_chord)
    return [(int(n.pitch.midi), sf) for n, sf in zip(notes, sfs)]


def _tab_tuning_and_frets(raw: list[tuple], default: tuple[int, ...]
                          ) -> tuple[tuple[int, ...], list[tuple[int, int]] | None]:
    """Tuning and per-note (string, fret) from notes that carry them: string s sounds pitch - fret when open.
    music21 does not keep MusicXML's <staff-tuning>, so each string's open pitch is the most common
    pitch - fret over its notes (strings never played keep the default). Frets are kept only when every note
    has one and they agree with that tuning (a capo is folded into the open pitches)."""
    sfs = [n[4] for n in raw]
    if not sfs or any(sf is None for sf in sfs):
        return default, None
    n_strings = max(len(default), max(sf[0] for sf in sfs))
    if n_strings == len(default):
        base = list(default)
    elif n_strings == 7 and len(default) == 6:
        base = list(TUNINGS["seven-string"])
    else:
        return default, None
    votes: dict[int, Counter] = {}
    for (_t, pitch, _d, _v, (st, fr)) in raw:
        votes.setdefault(st, Counter())[pitch - fr] += 1
    opens = {s: base[n_strings - s] for s in range(1, n_strings + 1)}  # base: lowest string first; tab: 1 = highest
    for st, c in votes.items():
        opens[st] = c.most_common(1)[0][0]
    tuning = tuple(opens[s] for s in range(n_strings, 0, -1))
    if any(pitch - fr != opens[st] for (_t, pitch, _d, _v, (st, fr)) in raw) or list(tuning) != sorted(tuning):
        return default, None  # inconsistent fingering, or strings not ordered low to high: keep the pitches only
    return tuning, list(sfs)


def _dedupe_by_time(events: list[tuple]) -> list[tuple]:
    """Sort events by time and keep the last one at each time."""
    by_time = {}
    for ev in sorted(events, key=lambda e: e[0]):
        by_time[ev[0]] = ev
    return list(by_time.values())
