"""Guitar Pro 6, 7 and 8 (.gpx, .gp): the GPIF score inside, one GuitarScore per guitar track.

A .gp (GP7/8) is a zip holding Content/score.gpif; a .gpx (GP6) is a BCFZ/BCFS container holding score.gpif
(see bcfz.py). GPIF is XML whose parts link by id: MasterBars (one per bar, in order) list one Bar per staff,
a Bar lists up to four Voices, a Voice lists Beats, a Beat names a Rhythm and its Notes. Beats and Notes are
shared by id wherever they repeat, so each reference is resolved as its own occurrence; what belongs to one
occurrence (a tie's open note, the note a hammer-on comes from) is keyed by staff, voice and string.
"""

from __future__ import annotations

import gc
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from xml.etree import ElementTree as ET

from guitarformer.errors import SkipFile
from guitarformer.music.drums import drum_part
from guitarformer.music.guitar import GUITAR_PROGRAM, TPQ
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.readers.base import (dedupe_by_time, new_score, no_guitar, no_notes, part_name, sounding,
                                       time_limit)
from guitarformer.readers.bcfz import gpx_file
from guitarformer.readers.gpif_drums import NO_KIT, drum_key, kit_keys
from guitarformer.readers.gp_notes import (DEFAULT_VELOCITY, DYNAMICS, GP_GUITAR, PartSetup, Row, SongClock, build_part,
                                           extend_tie, gp_role)
from guitarformer.readers.limits import ReadLimits, TooLarge, too_much_gpif
from guitarformer.readers.xml_safety import parse_xml, zip_member

# GP7+ write each note's pitch twice more as notation (ConcertPitch, TransposedPitch) and each beat's display
# settings; nothing here reads them (a drum note's InstrumentArticulation is read: it names the kit piece), and cutting them before parsing spares the parser a third of its elements.
# The property's body is bounded (real ones are about 100 bytes): with `.*?` each unclosed opening tag scanned to
# the end of the file, and a 1 MB file of them took minutes.
_UNUSED = re.compile(rb'<Property name="(?:ConcertPitch|TransposedPitch|PrimaryPickupVolume|PrimaryPickupTone)">'
                     rb".{0,1024}?</Property>|<(TransposedPitchStemOrientation|ConcertPitchStemOrientation)>"
                     rb"[^<]*</\1>", re.S)
MIN_QPM = 1.0  # a tempo below this is corrupt data, not music (it would stretch one bar over hours)
MAX_OCCURRENCES = 2_000_000  # beats placed in one staff: real scores place thousands; ids reused without end would hang
# A beat is one stroke: one note per string (a keyboard staff without strings: a chord). A beat listing more note
# ids than this, or a staff placing more notes in all, is corrupt or hostile: a 1.9 KB file listing one id
# thousands of times in a beat reused in every bar placed billions of notes (3.7 GB before MemoryError).
MAX_NOTES_PER_BEAT = 32
MAX_NOTES_PER_STAFF = 500_000  # the largest real score places about 20,000
GPIF_MAX_SECONDS = 60
NOTE_VALUES = {  # quarter notes per GPIF NoteValue
    "Long": 16, "DoubleWhole": 8, "Whole": 4, "Half": 2, "Quarter": 1, "Eighth": Fraction(1, 2),
    "16th": Fraction(1, 4), "32nd": Fraction(1, 8), "64th": Fraction(1, 16), "128th": Fraction(1, 32),
    "256th": Fraction(1, 64),
}
BEAT_UNITS = {1: 0.5, 2: 1.0, 3: 1.5, 4: 2.0, 5: 3.0}  # tempo's second number: eighth .. dotted half, in quarters
SLIDE_OUT = ((1, "shift"), (2, "legato"), (4, "down"), (8, "up"))  # Slide/Flags bits, first match wins
SLIDE_IN = ((16, "below"), (32, "above"))
TECHNIQUES = frozenset({"Bended", "Slide", "PalmMuted", "Muted", "Tapped", "LeftHandTapped", "HarmonicType", "Harmonic"})
TECHNIQUE_TAGS = frozenset({"LetRing", "Vibrato", "AntiAccent"})
HARMONICS = frozenset({"natural", "artificial", "pinch", "tap", "semi", "feedback"})  # HarmonicType/HType, lower-cased


def read_gpif(path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    """Every guitar track of a .gp/.gpx file (bass with include_bass; tracks="all": every pitched track).

    Pitch = open string + capo + fret, strings 1 = highest, ticks at TPQ=480. Tempo automations give the
    tempo (in quarter notes, whatever the beat unit) at their bar and position; ones that point past the
    last bar are dropped, as Guitar Pro does. Ties extend the note on their string; grace notes are short
    notes before their beat (or on it, delaying the main note on that string); repeats and simile bars are
    not expanded; ottava marks are notation and do not change the pitch. Techniques come per note.
    """
    with time_limit(GPIF_MAX_SECONDS, path), _no_gc():
        root = parse_gpif(gpif_bytes(path.read_bytes(), path.name), path.name)
        return scores_from_gpif(root, path, tracks, include_bass)


@contextmanager
def _no_gc():
    """Pause the cyclic garbage collector while a score's tens of thousands of XML elements are built and walked:
    they hold no cycles, yet every collection would traverse them again (reading takes about half as long)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def gpif_bytes(data: bytes, name: str, limits: ReadLimits | None = None) -> bytes:
    """The score.gpif inside a .gp (zip) or .gpx (BCFZ/BCFS) file's bytes, at most limits.max_gpif_mb of it."""
    limits = limits or ReadLimits.from_env()
    limit = int(limits.max_gpif_mb * (1 << 20)) or 1 << 40
    if data[:4] in (b"BCFZ", b"BCFS"):
        try:
            xml = gpx_file(data, "score.gpif", limit)
        except TooLarge as e:
            raise too_much_gpif(name, e.size, limits) from None
        except (ValueError, IndexError) as e:  # struct errors on cut-off data are ValueErrors too
            raise ValueError(f"{name}: unreadable Guitar Pro 6 container ({e})") from None
        if xml is None:
            raise ValueError(f"{name}: Guitar Pro 6 container without a score.gpif")
        return xml
    if data[:2] == b"PK":
        try:
            found = zip_member(data, lambda n: n.lower().endswith("score.gpif"), limit, name, "Guitar Pro 7/8 zip")
        except TooLarge as e:
            raise too_much_gpif(name, e.size, limits) from None
        if found is None:
            raise ValueError(f"{name}: a zip without Content/score.gpif (not a Guitar Pro 7/8 file)")
        return found[1]
    raise ValueError(f"{name}: not a Guitar Pro 6-8 file (starts with {data[:4]!r}, "
                     "not PK (GP7/8) or BCFZ/BCFS (GP6))")


def parse_gpif(xml: bytes, name: str) -> ET.Element:
    """The <GPIF> root of a score.gpif. A locked (protected) file's gpif is not XML at all: SkipFile."""
    head = xml[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"<"):
        raise SkipFile("score.gpif is not XML: a locked (protected) Guitar Pro file; unlock it in Guitar Pro")
    root = parse_xml(_UNUSED.sub(b"", xml), name, "score.gpif")
    if root.tag != "GPIF":
        raise ValueError(f"{name}: score.gpif's root is <{root.tag}>, not <GPIF>")
    return root


# --------------------------------------------------------------------------------------------- the score

def scores_from_gpif(root: ET.Element, path: Path, tracks: str, include_bass: bool) -> list[GuitarScore]:
    """The GuitarScores of a parsed GPIF document (see read_gpif)."""
    name = path.name
    track_els = list(root.find("Tracks") if root.find("Tracks") is not None else ())
    by_id = {t.get("id"): t for t in track_els}
    order = (root.findtext("MasterTrack/Tracks") or "").split()
    if sorted(order) != sorted(by_id):
        order = [t.get("id") for t in track_els]
    track_list = [by_id[i] for i in order]
    master_bars = list(root.find("MasterBars") if root.find("MasterBars") is not None else ())
    if not track_list or not master_bars:
        raise SkipFile(f"no tracks or no bars ({len(track_list)} tracks, {len(master_bars)} bars)")

    starts, lengths, time_signatures = _bar_times(master_bars, name)
    end = starts[-1] + lengths[-1]
    tempos = _tempos(root, starts, lengths, name)
    doc = _Document(root, name)

    staves = [(t, _staves(t)) for t in track_list]
    slots, first = [], 0  # first Bar slot of each track in MasterBar/Bars: one slot per staff, in track order
    for _, st in staves:
        slots.append(first)
        first += len(st)
    bar_ids = [(mb.findtext("Bars") or "").split() for mb in master_bars]

    roles = [_role(t, st) for t, st in staves]
    keep = [k for k, role in enumerate(roles)
            if tracks == "all" or role == "guitar" or (include_bass and role == "bass")]
    parts = []
    for k in keep:
        track, st = staves[k]
        track_name = (track.findtext("Name") or "").strip()
        for s, (tuning, capo) in enumerate(st):
            ids = [ids[slots[k] + s] if slots[k] + s < len(ids) else "-1" for ids in bar_ids]
            label = track_name if len(st) == 1 else f"{track_name} {s + 1}".strip()
            if roles[k] == "drums":
                gs = doc.drum_staff(ids, starts, kit_keys(track), label, new_score(TPQ, tempos, time_signatures))
            else:
                rows = doc.staff_rows(ids, starts, tuning, capo)
                setup = PartSetup(tuple(tuning) if tuning else (40, 45, 50, 55, 59, 64), capo, _program(track),
                                  label, "gp6+", keep_frets=bool(tuning))
                gs = rows and build_part(rows, setup, SongClock(tempos, time_signatures, end))
            if gs:
                gs.extra.update(path=str(path), role=roles[k])
                parts.append(gs)
    if not parts:
        if keep:
            raise no_notes(len(keep), len(track_list), tracks)
        raise no_guitar(len(track_list), tracks, GP_GUITAR, pitched=sum(r != "drums" for r in roles))
    for gs in parts:
        gs.name = part_name(path, gs.extra["track_name"], len(parts))
    return parts


def _bar_times(master_bars, name) -> tuple[list[int], list[int], list[tuple[int, int, int]]]:
    """Start and length (ticks) of every bar, and the time signature changes."""
    starts, lengths, signatures, t, last = [], [], [], 0, None
    for i, mb in enumerate(master_bars):
        text = (mb.findtext("Time") or "4/4").strip()
        try:
            num, den = (int(x) for x in text.split("/"))
        except ValueError:
            raise ValueError(f"{name}: bar {i + 1} has time signature {text!r}") from None
        if not (1 <= num <= 128 and den in (1, 2, 4, 8, 16, 32, 64, 128)):
            raise ValueError(f"{name}: bar {i + 1} has time signature {text!r}")
        if (num, den) != last:
            signatures.append((t, num, den))
            last = (num, den)
        length = num * 4 * TPQ // den
        starts.append(t)
        lengths.append(length)
        t += length
    return starts, lengths, signatures


def _tempos(root, starts, lengths, name) -> list[tuple[int, float]]:
    """Tempo automations as (tick, quarter notes per minute); ones past the last bar are dropped."""
    tempos = []
    for auto in root.iterfind("MasterTrack/Automations/Automation"):
        if (auto.findtext("Type") or "").strip() != "Tempo":
            continue
        try:
            bar = int(auto.findtext("Bar") or 0)
            position = float(auto.findtext("Position") or 0)
            value = (auto.findtext("Value") or "").split()
            bpm = float(value[0])
            unit = BEAT_UNITS.get(int(value[1]), 1.0) if len(value) > 1 else 1.0
        except (ValueError, IndexError):
            raise ValueError(f"{name}: unreadable tempo automation (bar {auto.findtext('Bar')!r}, "
                             f"value {auto.findtext('Value')!r})") from None
        if not 0 <= bar < len(starts):
            continue  # Guitar Pro ignores automations on bars that were deleted
        qpm = bpm * unit
        if not qpm >= MIN_QPM:  # also NaN
            raise ValueError(f"{name}: tempo {bpm:g} at bar {bar + 1} is near zero (corrupt tempo data)")
        tick = starts[bar] + round(min(1.0, max(0.0, position)) * lengths[bar])
        tempos.append((tick, qpm))
    return dedupe_by_time(tempos)


def _staves(track) -> list[tuple[tuple[int, ...], int]]:
    """(tuning lowest string first, capo) per staff: GP7 keeps them per Staff, GP6 per Track."""
    staff_els = track.findall("Staves/Staff")
    holders = [s.find("Properties") for s in staff_els] if staff_els else [track.find("Properties")]
    out = []
    for props in holders:
        tuning, capo = (), 0
        if props is not None:
            for prop in props.iterfind("Property"):
                kind = prop.get("name")
                if kind == "Tuning":
                    try:
                        tuning = tuple(int(x) for x in (prop.findtext("Pitches") or "").split())
                    except ValueError:
                        tuning = ()
                elif kind == "CapoFret":
                    capo = max(0, _int(prop.findtext("Fret"), 0))
        if not all(0 <= p <= 127 for p in tuning):
            tuning = ()
        out.append((tuning, capo))
    return out


def _role(track, staves) -> str:
    """'guitar', 'bass', 'drums' or 'other' (keyboards, winds, ... even where they carry strings and frets)."""
    kind = track.findtext("InstrumentSet/Type") or ""
    if not kind and track.find("Instrument") is not None:
        kind = track.find("Instrument").get("ref", "")
    element_types = {(e.text or "").strip() for e in track.iterfind("InstrumentSet/Elements/Element/Type")}
    midi_table = track.find("GeneralMidi")
    channel = (track.findtext("MidiConnection/PrimaryChannel") or track.findtext("GeneralMidi/PrimaryChannel") or "")
    percussion = bool(element_types - {"pitched", ""}) or "drum" in kind.lower() or kind.lower().endswith("kit") \
        or (midi_table is not None and midi_table.get("table") == "Percussion") or channel.strip() == "9"
    strings = max((len(t) for t, _ in staves), default=0)
    return gp_role(strings, _program(track), percussion, kind)


def _program(track) -> int:
    """The track's General MIDI program: GP7 Sounds/Sound/MIDI, GP6 GeneralMidi."""
    text = track.findtext("Sounds/Sound/MIDI/Program") or track.findtext("GeneralMidi/Program")
    program = _int(text, GUITAR_PROGRAM)
    return program if 0 <= program <= 127 else GUITAR_PROGRAM


def _int(text, default: int) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        try:
            return int(float(text))
        except (TypeError, ValueError, OverflowError):
            return default


# --------------------------------------------------------------------------------------------- beats and notes

class _Note:
    """One Note element, read once however often it is referenced."""

    __slots__ = ("string", "fret", "pitch", "tie_in", "technique", "hopo_out", "staccato", "accent", "kit")


class _Beat:
    __slots__ = ("duration", "notes", "grace", "velocity", "vibrato")


@dataclass(frozen=True)
class _VoiceState:
    """One voice of a staff while it is read: the staff's strings (`tuning`; empty: no strings) and
    capo, the rows the whole staff collects, and per string the note a tie extends and whether the last note
    hammers/pulls to the next (both kept per voice)."""

    tuning: tuple[int, ...]
    capo: int
    rows: list[Row]
    open_notes: dict[int, Row] = field(default_factory=dict)
    hopo_from: set[int] = field(default_factory=set)


class _Document:
    """The id-linked parts of a GPIF score, each read once on first use."""

    def __init__(self, root: ET.Element, name: str):
        self.name = name
        self.bars = _index(root.find("Bars"))
        self.voices = _index(root.find("Voices"))
        self.beat_els = _index(root.find("Beats"))
        self.note_els = _index(root.find("Notes"))
        self.rhythm_els = _index(root.find("Rhythms"))
        self._beats: dict[str, _Beat] = {}
        self._notes: dict[str, _Note] = {}
        self._rhythms: dict[str, int | Fraction] = {}
        self.kit: tuple | None = None  # while a drum staff is read: its track's kit (gpif_drums.kit_keys)
        self.unkeyed = 0  # drum notes left out: no drum key found for them

    def drum_staff(self, bar_ids: list[str], starts: list[int], kit: tuple, name: str, score) -> GuitarScore | None:
        """A drum staff as a drum part on `score` (the song's timing), each note at its drum key; None if empty."""
        self.kit, self.unkeyed = kit, 0
        try:
            rows = self.staff_rows(bar_ids, starts, (), 0)
        finally:
            self.kit = None
        if not rows:
            return None
        return drum_part([(r.time, r.duration, r.pitch, r.velocity) for r in rows], score, name, "gp6+",
                         {"unkeyed_drum_notes": self.unkeyed} if self.unkeyed else None)

    def staff_rows(self, bar_ids: list[str], starts: list[int], tuning: tuple[int, ...], capo: int) -> list[Row]:
        """The sounding notes of one staff: bar_ids[i] is its Bar in master bar i ("-1": none)."""
        rows: list[Row] = []
        placed = notes = 0
        for v in range(4):
            state = _VoiceState(tuning, capo, rows)
            for bar_index, bar_id in enumerate(bar_ids):
                bar = self.bars.get(bar_id)
                if bar is None:
                    continue
                voice_ids = (bar.findtext("Voices") or "").split()
                voice = self.voices.get(voice_ids[v]) if v < len(voice_ids) else None
                if voice is None:
                    continue
                t: int | Fraction = starts[bar_index]
                graces: list[_Beat] = []
                beat_ids = (voice.findtext("Beats") or "").split()
                placed += len(beat_ids)
                if placed > MAX_OCCURRENCES:
                    raise ValueError(f"{self.name}: more than {MAX_OCCURRENCES:,} beats in one staff "
                                     "(corrupt or looping references)")
                for beat_id in beat_ids:
                    beat = self.beat(beat_id)
                    if beat is None:
                        continue
                    if beat.grace:
                        graces.append(beat)
                        continue
                    start = round(t)
                    duration = max(1, round(t + beat.duration) - start)
                    delayed = {}
                    notes += len(beat.notes) + sum(len(g.notes) for g in graces)
                    if notes > MAX_NOTES_PER_STAFF:
                        raise ValueError(f"{self.name}: more than {MAX_NOTES_PER_STAFF:,} notes in one staff "
                                         "(corrupt or looping references)")
                    if graces:
                        delayed = self._graces(graces, start, state)
                        graces = []
                    for note in beat.notes:
                        self._place(note, state, start, duration, beat.velocity, delayed, beat.vibrato)
                    t += beat.duration
        return rows

    def _place(self, note: _Note, state: _VoiceState, start: int, duration: int, velocity: int, delayed: dict,
               vibrato: bool = False) -> None:
        """Add one occurrence of a note to `state` (or extend the note its tie continues)."""
        tuning, capo, open_notes, hopo_from = state.tuning, state.capo, state.open_notes, state.hopo_from
        n_strings = len(tuning)
        if self.kit is not None:  # a drum note: its key is its pitch, and a tie continues the same piece
            pitch = drum_key(note.kit, self.kit)
            if pitch is None:
                self.unkeyed += 1
                return
            string = pitch
        elif n_strings and 0 <= note.string < n_strings:
            string = n_strings - note.string  # 1 = highest
            pitch = tuning[note.string] + capo + note.fret
        elif note.pitch is not None and not n_strings:
            string, pitch = 0, note.pitch  # a staff without strings (keyboards, winds): pitch only
        else:
            return
        if note.tie_in and string in open_notes:
            extend_tie(open_notes[string], start + duration, hopo_from, string, note.hopo_out)
            return
        if not 0 <= pitch <= 127:
            return
        tech = note.technique
        if string in hopo_from:
            tech = replace(tech, hammer=True)
            hopo_from.discard(string)
        if vibrato and not tech.vibrato:
            tech = replace(tech, vibrato=True)
        if note.hopo_out:
            hopo_from.add(string)
        shift = delayed.get(string, 0)
        dur, vel = sounding(max(1, duration - shift), velocity, tech, note.staccato, note.accent)
        row = Row(start + shift, pitch, dur, vel, string, note.fret, tech)
        state.rows.append(row)
        open_notes[string] = row

    def _graces(self, graces: list[_Beat], start: int, state: _VoiceState) -> dict:
        """Place the grace beats before a beat at `start`; returns {string: ticks} the main notes start late."""
        before = [g for g in graces if g.grace == "BeforeBeat"]
        on = [g for g in graces if g.grace != "BeforeBeat"]
        n_strings = len(state.tuning)
        t = start - sum(round(g.duration) for g in before)
        if t < 0:  # nothing to steal time from before the first beat: play them on the beat
            on, before, t = graces, [], start
        delayed: dict[int, int] = {}
        for group, on_beat in ((before, False), (on, True)):
            for g in group:
                length = max(1, round(g.duration))
                for note in g.notes:
                    self._place(note, state, t, length, g.velocity, {}, g.vibrato)
                    if on_beat and n_strings and 0 <= note.string < n_strings:
                        string = n_strings - note.string
                        delayed[string] = delayed.get(string, 0) + length
                t += length
        return delayed

    # ------------------------------------------------------------------------------------ elements, once each

    def beat(self, beat_id: str) -> _Beat | None:
        beat = self._beats.get(beat_id)
        if beat is not None or beat_id not in self.beat_els:
            return beat
        el = self.beat_els[beat_id]
        beat = _Beat()
        rhythm = el.find("Rhythm")
        beat.duration = self.rhythm(rhythm.get("ref") if rhythm is not None else None)
        note_ids = list(dict.fromkeys((el.findtext("Notes") or "").split()))  # an id listed twice is one note
        if len(note_ids) > MAX_NOTES_PER_BEAT:
            raise ValueError(f"{self.name}: beat {beat_id} lists {len(note_ids):,} notes (at most "
                             f"{MAX_NOTES_PER_BEAT} make sense in one stroke: corrupt data)")
        beat.notes = [n for n in (self.note(i) for i in note_ids) if n is not None]
        beat.grace = (el.findtext("GraceNotes") or "").strip()
        beat.velocity = DYNAMICS.get((el.findtext("Dynamic") or "").strip().upper(), DEFAULT_VELOCITY)
        # a beat's vibrato (made with the whammy bar) is every note's vibrato, as in GP3-5's beat effects
        beat.vibrato = el.find("Properties/Property[@name='VibratoWTremBar']") is not None
        self._beats[beat_id] = beat
        return beat

    def rhythm(self, rhythm_id) -> int | Fraction:
        if rhythm_id in self._rhythms:
            return self._rhythms[rhythm_id]
        el = self.rhythm_els.get(rhythm_id)
        if el is None:
            raise ValueError(f"{self.name}: a beat refers to rhythm {rhythm_id!r}, which is not in the file")
        value = NOTE_VALUES.get((el.findtext("NoteValue") or "").strip())
        if value is None:
            raise ValueError(f"{self.name}: rhythm {rhythm_id} has note value {el.findtext('NoteValue')!r}")
        ticks = Fraction(TPQ) * value
        dots = el.find("AugmentationDot")
        if dots is not None:
            n = min(4, max(0, _int(dots.get("count"), 0)))
            ticks *= 2 - Fraction(1, 2 ** n)
        for tag in ("PrimaryTuplet", "SecondaryTuplet"):
            tup = el.find(tag)
            if tup is not None:
                num, den = _int(tup.get("num"), 1), _int(tup.get("den"), 1)
                if num > 0 and den > 0:
                    ticks = ticks * den / num
        ticks = int(ticks) if ticks.denominator == 1 else ticks
        self._rhythms[rhythm_id] = ticks
        return ticks

    def note(self, note_id: str) -> _Note | None:
        note = self._notes.get(note_id)
        if note is not None or note_id not in self.note_els:
            return note
        props, tags = {}, {}
        for child in self.note_els[note_id]:  # one pass: <Properties>, <Tie>, <Accent>, <LetRing>, ...
            if child.tag == "Properties":
                for prop in child:
                    props[prop.get("name")] = prop
            else:
                tags[child.tag] = child
        note = _Note()
        note.string = _int(_value(props.get("String")), -1)
        note.fret = max(0, _int(_value(props.get("Fret")), 0))
        note.pitch = _pitch(props) if note.string < 0 else None
        note.kit = _kit(props, tags)
        tie = tags.get("Tie")
        note.tie_in = tie is not None and tie.get("destination") == "true"
        note.hopo_out = "HopoOrigin" in props
        accent = _int(tags["Accent"].text, 0) if "Accent" in tags else 0
        note.staccato = bool(accent & 1)
        note.accent = bool(accent & (4 | 8))
        note.technique = _technique(props, tags) if TECHNIQUES.intersection(props) or \
            TECHNIQUE_TAGS.intersection(tags) else PLAIN
        self._notes[note_id] = note
        return note


def _index(parent) -> dict[str, ET.Element]:
    return {} if parent is None else {el.get("id"): el for el in parent}


def _value(prop) -> str | None:
    """The text of a Property's value element (<Fret>, <String>, <Float>, <Flags>, ...)."""
    if prop is None or not len(prop):
        return None
    return prop[0].text


def _kit(props: dict, tags: dict) -> tuple[int, int, int, int]:
    """What a drum note names of its kit piece: (InstrumentArticulation, Midi, Element, Variation), -1 if absent."""
    if "InstrumentArticulation" not in tags and "Element" not in props and "Midi" not in props:
        return NO_KIT
    return (_int(tags["InstrumentArticulation"].text, -1) if "InstrumentArticulation" in tags else -1,
            _int(_value(props.get("Midi")), -1), _int(_value(props.get("Element")), -1),
            _int(_value(props.get("Variation")), -1))


def _pitch(props) -> int | None:
    """MIDI pitch of a note without string and fret: GP7's Midi number, or GP6's Tone and Octave."""
    midi = _int(_value(props.get("Midi")), -1)
    if 0 <= midi <= 127:
        return midi
    tone, octave = _int(_value(props.get("Tone")), -1), _int(_value(props.get("Octave")), -1)
    if 0 <= tone < 12 and octave >= 0 and 0 <= 12 * octave + tone <= 127:
        return 12 * octave + tone
    return None


def _technique(props: dict, tags: dict) -> Technique:
    """A note's techniques from its properties and child elements (by name)."""
    found = {}
    if "Bended" in props:
        bend = _bend(props)
        if bend:
            found["bend"] = bend
    if "Slide" in props:
        flags = _int(_value(props["Slide"]), 0)
        found["slide_out"] = next((kind for bit, kind in SLIDE_OUT if flags & bit), "")
        found["slide_in"] = next((kind for bit, kind in SLIDE_IN if flags & bit), "")
    if "PalmMuted" in props:
        found["palm_mute"] = True
    if "Muted" in props:
        found["dead"] = True
    if "Tapped" in props or "LeftHandTapped" in props:
        found["tap"] = True
    if "HarmonicType" in props or "Harmonic" in props:
        kind = (_value(props.get("HarmonicType")) or "natural").strip().lower()
        found["harmonic"] = kind if kind in HARMONICS else "natural"
    if "LetRing" in tags:
        found["let_ring"] = True
    if (tags["Vibrato"].text or "").strip() if "Vibrato" in tags else False:
        found["vibrato"] = True
    if (tags["AntiAccent"].text or "").strip() if "AntiAccent" in tags else False:
        found["ghost"] = True
    return Technique(**found) if found else PLAIN


def _bend(props) -> tuple[tuple[float, float], ...]:
    """Bend points (position 0..1 of the note, quarter tones) from GPIF's origin/middle/destination."""

    def get(name, default):
        value = _value(props.get(name))
        try:
            return float(value) if value is not None else default
        except ValueError:
            return default

    origin = (get("BendOriginOffset", 0.0), get("BendOriginValue", 0.0))
    destination = (get("BendDestinationOffset", 100.0), get("BendDestinationValue", 0.0))
    points = [origin]
    if "BendMiddleValue" in props:
        middle = get("BendMiddleValue", 0.0)
        first = get("BendMiddleOffset1", 50.0)
        second = get("BendMiddleOffset2", first)
        points += [(first, middle), (second, middle)]
    points.append(destination)
    out: list[tuple[float, float]] = []
    for offset, value in points:  # 100 = a whole tone = 4 quarter tones; offsets in % of the note
        point = (round(min(100.0, max(0.0, offset)) / 100, 4), round(value / 25, 2))
        if not out or point != out[-1]:
            out.append(point)
    return tuple(out) if any(a for _, a in out) else ()
