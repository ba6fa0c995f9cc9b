"""Hostile and damaged music files, written on demand for the reliability sweep (benchmarks/sweep_hostile.py) and the
reader tests: each is a small file built to make a reader take unbounded memory or time, or to reach a code path
real files rarely do. `write_cases(folder)` writes them all and returns what each one is."""

from __future__ import annotations

import io
import random
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    what: str


def gpif(bars: int = 4, beat_notes: str = "0", beats: str = "0 0 0 0", extra: str = "", time: str = "4/4",
         tempo: str = "", doctype: str = "") -> bytes:
    """A minimal GPIF score: one six-string guitar track, `bars` bars all pointing at one Bar whose voice plays
    `beats` (beat ids), beat 0 listing `beat_notes` (note ids); note 0 is fret 3 on the low E."""
    auto = (f"<Automations><Automation><Type>Tempo</Type><Bar>0</Bar><Position>0</Position><Value>{tempo} 2</Value>"
            "</Automation></Automations>") if tempo else ""
    master = "".join(f"<MasterBar><Time>{time}</Time><Bars>0</Bars></MasterBar>" for _ in range(bars))
    return (f'<?xml version="1.0" encoding="utf-8"?>{doctype}<GPIF><MasterTrack><Tracks>0</Tracks>{auto}</MasterTrack>'
            '<Tracks><Track id="0"><Name>Gtr</Name><Properties><Property name="Tuning"><Pitches>40 45 50 55 59 64'
            '</Pitches></Property></Properties><GeneralMidi><Program>25</Program></GeneralMidi></Track></Tracks>'
            f'<MasterBars>{master}</MasterBars><Bars><Bar id="0"><Voices>0 -1 -1 -1</Voices></Bar></Bars>'
            f'<Voices><Voice id="0"><Beats>{beats}</Beats></Voice></Voices>'
            f'<Beats><Beat id="0"><Rhythm ref="0"/><Notes>{beat_notes}</Notes></Beat></Beats>'
            '<Notes><Note id="0"><Properties><Property name="String"><String>5</String></Property>'
            '<Property name="Fret"><Fret>3</Fret></Property></Properties></Note></Notes>'
            f'<Rhythms><Rhythm id="0"><NoteValue>Quarter</NoteValue></Rhythm></Rhythms>{extra}</GPIF>').encode()


def gpif_chords(bars: int) -> bytes:
    """A GPIF score of `bars` bars (all one Bar) of four beats, each a six-note chord (distinct note ids, one per
    string): 24 notes a bar for about 60 bytes a bar."""
    notes = "".join(f'<Note id="{s}"><Properties><Property name="String"><String>{s}</String></Property>'
                    '<Property name="Fret"><Fret>3</Fret></Property></Properties></Note>' for s in range(6))
    score = gpif(bars=bars, beat_notes="0 1 2 3 4 5").decode()
    start, end = score.index("<Notes><Note"), score.index("</Notes>", score.index("<Notes><Note")) + len("</Notes>")
    return (score[:start] + f"<Notes>{notes}</Notes>" + score[end:]).encode()


def gp5_chords(bars: int) -> bytes:
    """A Guitar Pro 5 file (written with PyGuitarPro) of `bars` bars of sixteen six-note chords: 96 notes a bar."""
    import guitarpro  # the scripts' and tests' environment has it (a dependency of the package)

    song = guitarpro.Song()
    track, first = song.tracks[0], song.measureHeaders[0]
    voice = track.measures[0].voices[0]
    for _ in range(16):
        beat = guitarpro.Beat(voice, duration=guitarpro.Duration(value=16), status=guitarpro.BeatStatus.normal)
        beat.notes = [guitarpro.Note(beat, value=3, string=s, type=guitarpro.NoteType.normal) for s in range(1, 7)]
        voice.beats.append(beat)
    for i in range(1, bars):
        song.addMeasureHeader(guitarpro.MeasureHeader(number=i + 1, start=first.start + i * first.length,
                                                      timeSignature=first.timeSignature))
        measure = guitarpro.Measure(track, song.measureHeaders[i])
        measure.voices[0].beats = voice.beats  # the same beats in every bar: the writer only reads them
        track.measures.append(measure)
    buf = io.BytesIO()
    guitarpro.write(song, buf, version=(5, 1, 0))
    return buf.getvalue()


def gp_zip(score_gpif: bytes, stored: bool = False) -> bytes:
    """A .gp (GP7/8) file: a zip holding Content/score.gpif (deflated, or `stored` as it is)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("Content/score.gpif", score_gpif)
    return buf.getvalue()


def musicxml(measures: int = 1, notes_per_measure: int = 4, parts: bool = True, doctype: str = "",
             body: str = "") -> bytes:
    note = "<note><pitch><step>E</step><octave>3</octave></pitch><duration>1</duration><type>quarter</type></note>"
    measure = "".join(f'<measure number="{i + 1}">' + ("<attributes><divisions>1</divisions></attributes>" if i == 0
                      else "") + note * notes_per_measure + "</measure>" for i in range(measures))
    part_list = '<part-list><score-part id="P1"><part-name>Guitar</part-name></score-part></part-list>'
    content = f'{part_list}<part id="P1">{measure}</part>' if parts else ""
    return (f'<?xml version="1.0" encoding="UTF-8"?>{doctype}<score-partwise version="3.1">{body}{content}'
            '</score-partwise>').encode()


def mxl(xml: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("META-INF/container.xml", '<?xml version="1.0"?><container><rootfiles><rootfile '
                    'full-path="score.musicxml"/></rootfiles></container>')
        zf.writestr("score.musicxml", xml)
    return buf.getvalue()


BILLION_LAUGHS = ('<!DOCTYPE lolz [<!ENTITY lol "lol">' + "".join(
    f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)) + "]>")


def midi_with_jumps(jumps: int = 4) -> bytes:
    """A format-0 MIDI whose notes sit 2^28 ticks apart (a 300-byte file believed would be days long)."""
    def vlq(n: int) -> bytes:
        out = [n & 0x7F]
        while n > 127:
            n >>= 7
            out.append(0x80 | (n & 0x7F))
        return bytes(reversed(out))
    track = b"\x00\xc0\x19"
    for _ in range(jumps):
        track += vlq((1 << 28) - 1) + b"\x90\x40\x50" + vlq(240) + b"\x80\x40\x00"
    track += b"\x00\xff\x2f\x00"
    return b"MThd" + struct.pack(">IHHH", 6, 0, 1, 480) + b"MTrk" + struct.pack(">I", len(track)) + track


def musicxml_many_notes(notes: int) -> bytes:
    """MusicXML of one guitar part: `notes` quarter notes in one measure, each as short as a note element gets."""
    note = "<note><pitch><step>E</step><octave>3</octave></pitch><duration>1</duration></note>"
    return musicxml(measures=1, notes_per_measure=0).replace(b"</measure>", (note * notes).encode() + b"</measure>")


PENTATONIC = (40, 43, 45, 47, 50, 52, 55, 57, 59, 62, 64, 67)  # E minor, up two octaves: a riff to finger


def midi_many_notes(notes: int) -> bytes:
    """A format-0 MIDI of one guitar track playing `notes` sixteenths back to back, up and down the E minor
    pentatonic (6 bytes a note: running status, a note-on of velocity 0 as its note-off)."""
    cycle = PENTATONIC + PENTATONIC[::-1]
    pattern = b"".join(bytes((0, p, 0x50, 120, p, 0)) for p in cycle)
    body = (pattern * (notes // len(cycle) + 1))[: 6 * notes]
    track = b"\x00\xc0\x19\x00\x90" + body[1:] + b"\x00\xff\x2f\x00"  # the first delta is before 0x90
    return b"MThd" + struct.pack(">IHHH", 6, 0, 1, 480) + b"MTrk" + struct.pack(">I", len(track)) + track


def ascii_tab(staves: int, width: int = 64, dense: bool = False) -> bytes:
    """`staves` six-string staves `width` columns wide; `dense`: a fret every other column on every string (six
    notes for each two columns, as many notes as a tab's text holds)."""
    bar = "|" + ("-3" * (width // 2) if dense else "-3-2-3-2-0-" * max(1, width // 11))
    lines = [f"{s}{bar}|" for s in "eBGDAE"]
    return ("\n".join(lines) + "\n\n").encode() * staves


def tab_after_blanks(blanks: int, lines: int) -> bytes:
    """A one-staff ASCII tab under `lines` text lines of `blanks` blanks, after nothing, the word "time" or "guitar" in
    turn (the patterns that read tab lines, version lines, a time signature and a guitar's mark were quadratic or
    cubic in such runs)."""
    text = "\n".join(("", "time", "guitar")[k % 3] + " " * blanks + "x" for k in range(lines)) + "\n"
    return (text + ascii_tab(staves=1, width=16).decode()).encode()


def write_cases(folder: Path) -> list[Case]:
    """Write every hostile case into `folder` (about 110 MB, most of it a MIDI of ten million notes and an ASCII
    tab); returns them in order."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = []

    def case(name: str, filename: str, data: bytes, what: str) -> None:
        path = folder / filename
        path.write_bytes(data)
        cases.append(Case(name, path, what))

    case("gp-note-id-repeated", "note_repeat.gp", gp_zip(gpif(bars=2000, beat_notes=" ".join(["0"] * 5000))),
         "one note id listed 5,000 times in a beat played 8,000 times")
    case("gp-gpif-inflated", "inflated.gp", gp_zip(gpif(extra=" " * (256 << 20))),
         "score.gpif inflates to 256 MB")
    case("gp-unclosed-tags", "unclosed.gp", gp_zip(b"<GPIF>" + b'<Property name="ConcertPitch">x' * 30_000),
         "1 MB of unclosed <Property> tags (a quadratic regex before)")
    case("gp-entity-bomb", "bomb.gp", gp_zip(gpif(doctype=BILLION_LAUGHS, beat_notes="&lol9;")),
         "score.gpif with a billion-laughs entity bomb")
    case("gp-zero-tempo", "zero_tempo.gp", gp_zip(gpif(tempo="0")), "a tempo of 0 BPM")
    case("gp-huge-bar", "huge_bar.gp", gp_zip(gpif(time="128/1")), "a 128/1 time signature: one bar of 512 quarters")
    case("mxl-inflated", "inflated.mxl", mxl(musicxml(measures=4000, notes_per_measure=64)),
         "a .mxl whose MusicXML inflates to ~40 MB (music21 took 6 GB on such a file)")
    case("musicxml-entity-bomb", "bomb.musicxml", musicxml(doctype=BILLION_LAUGHS,
                                                            body="<work><work-title>&lol9;</work-title></work>"),
         "MusicXML with a billion-laughs entity bomb")
    case("musicxml-no-parts", "no_parts.musicxml", musicxml(parts=False), "MusicXML without any part")
    case("tab-30mb", "huge.txt", ascii_tab(staves=30 * 2**20 // 400, width=64), "a 27 MB ASCII tab (the issue's was 30 MB)")
    case("tab-wide", "wide.txt", ascii_tab(staves=1, width=400_000), "one 400,000-column tab staff")
    case("tab-blank-lines", "blanks.txt", tab_after_blanks(blanks=50_000, lines=50),
         "a 2.5 MB tab under 50 lines of 50,000 blanks each (cubic regexes before: 4,000 blanks took 166 s)")
    case("midi-jumps", "jumps.mid", midi_with_jumps(), "a 300-byte MIDI whose notes are 2^28 ticks apart")
    # Millions of notes in every format, each under its format's size limits: bounded by the note limits right
    # after the read (a 60 MB MIDI of ten million notes ran `tab` for 3 minutes into 24 GB before)
    case("midi-10m-notes", "notes.mid", midi_many_notes(10_000_000), "a 60 MB MIDI: 10,000,000 sixteenths")
    case("midi-longest-real-part", "longest.mid", midi_many_notes(5_000),
         "a MIDI part of 5,000 sixteenths, as long as the longest real part (4,940 notes): worked through")
    case("gp-4m-notes", "notes.gp", gp_zip(gpif_chords(bars=160_000), stored=True),
         "a .gp (score.gpif stored, not deflated: 8 MB) of 3,840,000 notes in six-note chords")
    case("gp5-2m-notes", "notes.gp5", gp5_chords(bars=20_000), "a 10 MB GP5 of 1,920,000 notes in six-note chords")
    case("tab-2m-notes", "notes.txt", ascii_tab(staves=1_600, width=400, dense=True),
         "a 3.9 MB ASCII tab with a fret every other column on every string: 1,920,000 notes")
    case("musicxml-45k-notes", "notes.musicxml", musicxml_many_notes(45_000),
         "3.7 MB of MusicXML (just under the text limit): 45,000 notes")
    case("mxl-1m-notes", "notes.mxl", mxl(musicxml_many_notes(1_000_000)),
         "a .mxl whose MusicXML holds 1,000,000 notes (82 MB inflated)")
    rng = random.Random(0)
    case("binary-as-tab", "elf.txt", b"\x7fELF" + bytes(rng.randrange(256) for _ in range(4000)),
         "an executable named .txt")
    return cases


def mutations(data: bytes, seed: int) -> dict[str, bytes]:
    """Truncations (at 1/4, 1/2, 3/4 of the file) and bit flips (1, 10 and 100 random bits) of a file's bytes."""
    rng = random.Random(seed)
    out = {f"cut{k}of4": data[: len(data) * k // 4] for k in (1, 2, 3)}
    for flips in (1, 10, 100):
        b = bytearray(data)
        for _ in range(flips):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        out[f"flip{flips}"] = bytes(b)
    return out
