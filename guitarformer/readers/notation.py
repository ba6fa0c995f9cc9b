"""MusicXML and ABC through music21, and music21 scores in memory (the built-in corpus)."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import music21
import symusic
from music21 import articulations, harmony, instrument, meter
from music21.musicxml.xmlToM21 import MusicXMLImporter

from guitarformer.errors import SkipFile
from guitarformer.music.guitar import (
    BASS_PROGRAMS,
    BASS_TUNING,
    GUITAR_PROGRAM,
    GUITAR_PROGRAMS,
    STANDARD_TUNING,
    TPQ,
    TUNINGS,
)
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.readers.base import (
    DEFAULT_VELOCITY,
    TRACK_CHOICES,
    add_pitch_bends,
    bend_points,
    dedupe_by_time,
    new_score,
    no_guitar,
    sounding,
    time_limit,
)
from guitarformer.readers.limits import ReadLimits, TooLarge, check_notes, too_much_text
from guitarformer.readers.xml_safety import parse_xml, zip_member

M21_MAX_SECONDS = 120  # music21 is slow on big scores; a stuck parse is reported, not waited on


def read_notation(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    limits = ReadLimits.from_env()
    if path.suffix.lower() == ".abc":
        size = path.stat().st_size
        if limits.max_text_mb and size > limits.max_text_mb * (1 << 20):
            raise too_much_text(path.name, "the ABC text", size, limits)
        fmt = "abc"
        parse = functools.partial(music21.converter.parse, str(path), format="abc")
    else:
        fmt = "musicxml"
        parse = functools.partial(_score_from_root, path, _musicxml_root(path, limits))
    try:
        with time_limit(M21_MAX_SECONDS, path):
            parsed = parse()
    except (TimeoutError, SkipFile):
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
        raise no_guitar(n_parts, tracks)
    return parts


def _musicxml_bytes(path: Path, limits: ReadLimits) -> bytes:
    """The MusicXML text of a .musicxml/.xml file or of the score inside a .mxl, within limits.max_text_mb."""
    limit = int(limits.max_text_mb * (1 << 20)) or 1 << 40
    data = path.read_bytes()
    if path.suffix.lower() == ".mxl" or data[:4] == b"PK\x03\x04":
        try:
            found = zip_member(data, _is_score_member, limit, path.name)
        except TooLarge as e:
            raise too_much_text(path.name, "the MusicXML inside it", e.size, limits) from None
        if found is None:
            raise SkipFile("a zip without a MusicXML score inside (not a .mxl file)")
        data = found[1]
    elif len(data) > limit:
        raise too_much_text(path.name, "the MusicXML", len(data), limits)
    head = data[:4096]
    if b"<GPIF" in head:
        raise SkipFile("Guitar Pro 6+ internal XML (GPIF) is not MusicXML; read the .gp/.gpx file it came from")
    if b"score-timewise" in head:
        raise SkipFile("timewise MusicXML (score-timewise) is not read; save it as partwise MusicXML")
    if b"score-partwise" not in head:
        raise SkipFile("XML file is not MusicXML (no score-partwise root)")
    return data


def _is_score_member(name: str) -> bool:
    return not name.upper().startswith("META-INF/") and name.lower().endswith((".xml", ".musicxml"))


def _musicxml_root(path: Path, limits: ReadLimits):
    """The <score-partwise> root of a MusicXML file, parsed by defusedxml (entities refused whatever the platform's
    expat), to hand to music21's importer as a tree; ReadLimitError past the note limits."""
    root = parse_xml(_musicxml_bytes(path, limits), path.name, "the MusicXML")
    if root.tag != "score-partwise":
        raise SkipFile(f"XML root <{root.tag}> is not <score-partwise> (not partwise MusicXML)")
    if root.find("part") is None:
        raise SkipFile("MusicXML without any <part>: no music to read")
    # music21 takes about a millisecond a note: the note limits are checked on the tree, before it starts
    check_notes(path.name, [sum(n.find("rest") is None for n in part.iter("note")) for part in root.iter("part")],
                limits)
    return root


def _score_from_root(path: Path, root):
    importer = MusicXMLImporter()
    importer.xmlRootToScore(root, importer.stream)
    score = importer.stream
    if score.metadata is not None and score.metadata.movementName is None:
        score.metadata.movementName = path.name  # as music21's own file reader names an untitled score
    return score


def _m21_role(part) -> str:
    """'guitar', 'bass', 'drums' or 'other' for a music21 Part, from its instrument and name."""

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

    if tracks not in TRACK_CHOICES:
        raise ValueError(f"tracks must be one of {TRACK_CHOICES}, not {tracks!r}")
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
        raise no_guitar(len(all_parts), tracks, pitched=len(pitched))

    tempos = _tempos(m21score)
    linked = _linked_notes(m21score)
    out = []
    for part, role in keep:
        if part.atSoundingPitch is False or part.atSoundingPitch == "unknown":
            part = part.toSoundingPitch(inPlace=False)
        time_signatures, raw = _part_notes(part, linked)
        if not raw:
            continue
        is_bass = role == "bass"
        tuning, frets = _tab_tuning_and_frets(raw, BASS_TUNING if is_bass else STANDARD_TUNING)
        score = new_score(TPQ, tempos, time_signatures)
        inst = part.getInstrument(returnDefault=False)
        program = getattr(inst, "midiProgram", None)
        if tracks == "guitar" and not is_bass and (program is None or program not in GUITAR_PROGRAMS):
            program = GUITAR_PROGRAM
        track = symusic.Track(str(part.partName or name or ""), int(program if program is not None else 0), False)
        bent = []
        for start, pitch, dur, vel, _sf, tech in raw:
            dur, vel = sounding(dur, vel, tech)
            track.notes.append(symusic.Note(start, dur, pitch, vel))
            if tech.bend:
                bent.append((start, dur, tech.bend))
        add_pitch_bends(track, bent)
        score.tracks.append(track)
        part_label = str(part.partName or "")
        techniques = [n[5] for n in raw]
        out.append(GuitarScore(
            score=score,
            tuning=tuning,
            frets=frets,
            techniques=techniques if frets is not None or any(techniques) else None,
            name=f"{name} [{part_label}]" if part_label and len(keep) > 1 else name,
            source_format=source_format,
            extra={"part_name": part_label},
        ))
    if not out:
        raise SkipFile(f"guitar part(s) of {name or 'score'} hold no notes")
    return out


def _tempos(m21score) -> list[tuple[int, float]]:
    """The tempo map of the whole score (ABC and many MusicXML files put it in one part only)."""
    tempos: list[tuple[int, float]] = []
    try:
        for start, _end, mm in m21score.metronomeMarkBoundaries():
            qpm = mm.getQuarterBPM()
            if qpm and qpm > 0:
                tempos.append((round(float(start) * TPQ), float(qpm)))
    except Exception:  # odd MetronomeMarks (text only) should not lose the notes
        tempos = []
    return dedupe_by_time(tempos) or [(0, 120.0)]


def _part_notes(part, linked: dict) -> tuple[list[tuple[int, int, int]], list[tuple]]:
    """A part's time signatures and its notes as (start, pitch, duration, velocity, (string, fret) or None,
    technique), sorted; ties merged, grace notes and chord symbols dropped, a note two voices share kept once."""
    flat = part.flatten().stripTies(inPlace=False)
    time_signatures = dedupe_by_time([
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
        for midi, sf, tech in _m21_pitches_with_frets(el, linked, float(el.offset)):
            if 0 <= midi <= 127:
                raw.append((start, midi, dur, int(vel), sf, tech))
    # Two voices sharing a note (common in notation) would be two overlapping MIDI notes of one pitch; keep the
    # longest.
    longest: dict[tuple[int, int], tuple] = {}
    for note in raw:
        if note[:2] not in longest or note[2] > longest[note[:2]][2]:
            longest[note[:2]] = note
    return time_signatures, sorted(longest.values(), key=lambda n: n[:4])


def _m21_pitches_with_frets(el, linked: dict, offset: float) -> list[tuple[int, tuple[int, int] | None, Technique]]:
    """(MIDI pitch, (string, fret) or None, technique) for each pitch of a music21 note or chord. MusicXML TAB
    staves (and tab-aware notation) carry <technical><string>/<fret> (and <bend>, <harmonic>, <tap>), which
    music21 keeps as articulations: on each note of a chord, or gathered on the chord itself in note order.
    `linked`: see _linked_notes."""

    def groups(arts) -> list[list]:
        """The articulations of each note, split where a note's (string, fret) pair is complete."""
        out, current, st, fr = [], [], None, None
        for a in arts:
            current.append(a)
            if isinstance(a, articulations.StringIndication):
                st = a.number
            elif isinstance(a, articulations.FretIndication) and not isinstance(a, (articulations.FretBend,
                                                                                   articulations.FretTap)):
                fr = a.number
            if isinstance(st, int) and isinstance(fr, int):
                out.append(current)
                current, st, fr = [], None, None
        if out and current:
            out[-1] += current  # a bend written after the pair still belongs to that note
        return out

    def pair(arts) -> tuple[int, int] | None:
        st = next((a.number for a in arts if isinstance(a, articulations.StringIndication)), None)
        fr = next((a.number for a in arts if isinstance(a, articulations.FretIndication)
                   and not isinstance(a, (articulations.FretBend, articulations.FretTap))), None)
        return (st, fr) if isinstance(st, int) and isinstance(fr, int) and st >= 1 and fr >= 0 else None

    notes = list(getattr(el, "notes", ()))
    if not notes:
        own = groups(getattr(el, "articulations", ()))
        arts = own[0] if len(own) == 1 else list(getattr(el, "articulations", ()))
        sf = pair(own[0]) if len(own) == 1 else None
        return [(int(p.midi), sf, _m21_technique(el, arts, linked, offset)) for p in getattr(el, "pitches", ())]
    per_note = [list(getattr(n, "articulations", ())) for n in notes]
    if not any(pair(arts) for arts in per_note):
        on_chord = groups(getattr(el, "articulations", ()))
        if len(on_chord) == len(notes):
            per_note = on_chord
    return [(int(n.pitch.midi), pair(arts), _m21_technique(n, arts, linked, offset)) for n, arts in zip(notes, per_note)]


def _linked_notes(m21score) -> dict[tuple[float, int], dict]:
    """Technique fields that music21 keeps as spanners between two notes, by (offset, MIDI pitch) of the note
    they belong to: a hammer-on or pull-off (on the note it lands on) and a slide (on the note it leaves)."""
    out: dict[tuple[float, int], dict] = {}

    def key(n) -> tuple[float, int] | None:
        if not hasattr(n, "pitch"):
            return None
        offset, site = float(n.offset), n.activeSite
        while site is not None and not isinstance(site, music21.stream.Part):  # voice -> measure -> part
            offset += float(site.offset)
            site = site.activeSite
        return offset, int(n.pitch.midi)

    for sp in m21score.recurse().getElementsByClass((articulations.HammerOn, articulations.PullOff,
                                                     music21.spanner.Glissando)):
        spanned = sp.getSpannedElements()
        if len(spanned) < 2:
            continue
        if isinstance(sp, music21.spanner.Glissando):
            k, fields = key(spanned[0]), {"slide_out": "legato"}
        else:
            k, fields = key(spanned[-1]), {"hammer": True}
        if k is not None:
            out.setdefault(k, {}).update(fields)
    return out


def _m21_technique(note, arts, linked: dict, offset: float) -> Technique:
    """A note's techniques from its articulations (bends, harmonics, taps), notehead (x: dead, in parentheses:
    ghost) and the spanners `linked` found."""
    found = dict(linked.get((offset, int(note.pitch.midi)), {})) if hasattr(note, "pitch") else {}
    amounts, bent = [0.0], False
    for a in arts:
        if isinstance(a, articulations.FretBend) and a.bendAlter is not None:
            semitones = float(a.bendAlter.semitones) if hasattr(a.bendAlter, "semitones") else float(a.bendAlter)
            if a.preBend:  # bent before it sounds: the bend starts there
                amounts[0] = max(0.0, 2 * semitones)
            else:
                amounts.append(max(0.0, amounts[-1] + 2 * semitones))
            bent = True
        elif isinstance(a, articulations.Harmonic):
            kind = getattr(a, "harmonicType", "natural")
            found["harmonic"] = "artificial" if kind == "artificial" else "natural"
        elif isinstance(a, articulations.FretTap):
            found["tap"] = True
    if bent and any(amounts):
        found["bend"] = bend_points(amounts)
    if getattr(note, "notehead", None) == "x":
        found["dead"] = True
    if getattr(note, "noteheadParenthesis", False):
        found["ghost"] = True
    return Technique(**found) if found else PLAIN


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
    for _t, pitch, _d, _v, (st, fr), *_ in raw:
        votes.setdefault(st, Counter())[pitch - fr] += 1
    opens = {s: base[n_strings - s] for s in range(1, n_strings + 1)}  # base: lowest string first; tab: 1 = highest
    for st, c in votes.items():
        opens[st] = c.most_common(1)[0][0]
    tuning = tuple(opens[s] for s in range(n_strings, 0, -1))
    if any(pitch - fr != opens[st] for _t, pitch, _d, _v, (st, fr), *_ in raw) or list(tuning) != sorted(tuning):
        return default, None  # inconsistent fingering, or strings not ordered low to high: keep the pitches only
    return tuning, list(sfs)

