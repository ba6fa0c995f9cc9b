"""Guitar Pro 6-8 (.gpx, .gp): the BCFZ/BCFS container, the GPIF score, dirt from real files, and the
alphaTab/slundi test scores saved as GP3-5 and GP6-8 read against each other (skipped without the shared data)."""

from __future__ import annotations

import importlib.util
import struct
import zipfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from guitarformer.errors import SkipFile
from guitarformer.music.score import Technique
from guitarformer.readers import read_guitar
from guitarformer.readers.base import DEAD_NOTE_TICKS, DEAD_NOTE_VELOCITY
from guitarformer.readers.bcfz import SECTOR, decompress, gpx_file, gpx_files, read_bcfs

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "guitar"


# --------------------------------------------------------------------------------------------- building files

def bits_to_bytes(bits: str) -> bytes:
    bits += "0" * (-len(bits) % 8)
    return bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))


def literal_bcfz(content: bytes, then: str = "", declared: int | None = None) -> bytes:
    """A valid BCFZ block of literal runs only (no back-references): what the decompressor must undo; `then`:
    more bits after them."""
    bits = []
    for i in range(0, len(content), 3):
        run = content[i:i + 3]
        n = len(run)
        bits.append("0" + f"{n & 1}{n >> 1}" + "".join(f"{b:08b}" for b in run))  # n: two bits, lowest first
    length = len(content) if declared is None else declared
    return b"BCFZ" + struct.pack("<i", length) + bits_to_bytes("".join(bits) + then)


def bcfs(files: dict[str, bytes]) -> bytes:
    """A BCFS sector file system holding `files` (sector 0 unused, one entry sector per file, then its data)."""
    sectors = [bytes(SECTOR)]
    for name, content in files.items():
        entry_at = len(sectors)
        data_sectors = [content[i:i + SECTOR].ljust(SECTOR, b"\0") for i in range(0, len(content), SECTOR)]
        numbers = list(range(entry_at + 1, entry_at + 1 + len(data_sectors)))
        entry = bytearray(SECTOR)
        struct.pack_into("<i", entry, 0, 2)
        entry[4:4 + len(name)] = name.encode()
        struct.pack_into("<i", entry, 0x8C, len(content))
        for k, number in enumerate(numbers):
            struct.pack_into("<i", entry, 0x94 + 4 * k, number)
        sectors += [bytes(entry), *data_sectors]
    return b"BCFS" + b"".join(sectors)


def _note(i: int, string: int, fret: int, props: str = "", inner: str = "") -> str:
    return (f'<Note id="{i}">{inner}<Properties><Property name="String"><String>{string}</String></Property>'
            f'<Property name="Fret"><Fret>{fret}</Fret></Property>{props}</Properties></Note>')


def _prop(name: str, value: str = "<Enable/>") -> str:
    return f'<Property name="{name}">{value}</Property>'


def _beat(i: int, rhythm: int, notes: str = "", extra: str = "") -> str:
    return f'<Beat id="{i}">{extra}<Rhythm ref="{rhythm}"/>' + (f"<Notes>{notes}</Notes>" if notes else "") + "</Beat>"


def gpif(gp6: bool = False, tempos: str = "", score: str = "") -> str:
    """A tiny score: a drop-D guitar with capo 2 (two bars, 4/4 then 3/4, two voices, beats shared by id across
    bars), a piano staff that carries strings and frets, a bass and drums.

    Guitar, bar 1 -- voice 1: A|3 | D|2 tied over two beats | G|7 bent a whole tone and released + B|5 legato
    slide; voice 2: a whole low D|0, palm-muted and let ring. Bar 2 -- voice 1: a 32nd grace A|2 before the beat
    that hammers on to A|3 (beat 0 again, shared by id) | dotted eighth e|12 natural harmonic with vibrato and
    ghosted + a dead low string | a triplet-eighth rest | a triplet-eighth tapped e|15; voice 2: beats 1 and 2
    again (the tied D|2) and a quarter rest.
    """
    tempos = tempos or ('<Automation><Type>Tempo</Type><Bar>0</Bar><Position>0</Position><Value>120 2</Value>'
                        '</Automation><Automation><Type>Tempo</Type><Bar>1</Bar><Position>0.5</Position>'
                        '<Value>90 3</Value></Automation>')
    def props(pitches: str, capo: int) -> str:
        return ("<Properties>" + _prop("CapoFret", f"<Fret>{capo}</Fret>") + _prop("Tuning", f"<Pitches>{pitches}</Pitches>")
                + "</Properties>")

    def track(i, name, kind, ref, program, pitches, capo=0, percussion=False):
        if gp6:  # GP6: the instrument by reference, GeneralMidi, tuning and capo on the track
            table = "Percussion" if percussion else "Instrument"
            return (f'<Track id="{i}"><Name><![CDATA[{name}]]></Name><Instrument ref="{ref}"/>'
                    f'<GeneralMidi table="{table}"><Program>{program}</Program>'
                    f'<PrimaryChannel>{9 if percussion else i}</PrimaryChannel></GeneralMidi>'
                    f"{props(pitches, capo)}</Track>")
        element = "snare" if percussion else "pitched"  # GP7: an instrument set, sounds, tuning and capo per staff
        return (f'<Track id="{i}"><Name><![CDATA[{name}]]></Name><InstrumentSet><Type>{kind}</Type><Elements>'
                f'<Element><Type>{element}</Type></Element></Elements></InstrumentSet>'
                f'<Sounds><Sound><MIDI><Program>{program}</Program></MIDI></Sound></Sounds>'
                f"<Staves><Staff>{props(pitches, capo)}</Staff></Staves></Track>")

    tracks = (track(0, "Lead", "electricGuitar", "e-gtr6", 29, "38 45 50 55 59 64", capo=2)
              + track(1, "Keys", "acousticPiano", "a-piano-gs", 0, "40 45 50 55 59 64")
              + track(2, "Bass", "electricBass", "e-bass4", 33, "28 33 38 43")
              + track(3, "Drums", "drumKit", "drmkt", 0, "40 45 50 55 59 64", percussion=True))
    bend = (_prop("Bended") + _prop("BendOriginValue", "<Float>0</Float>") + _prop("BendOriginOffset", "<Float>0</Float>")
            + _prop("BendMiddleValue", "<Float>100</Float>") + _prop("BendMiddleOffset1", "<Float>30</Float>")
            + _prop("BendMiddleOffset2", "<Float>60</Float>") + _prop("BendDestinationValue", "<Float>0</Float>")
            + _prop("BendDestinationOffset", "<Float>100</Float>"))
    notes = "".join([
        _note(0, 1, 3),
        _note(1, 2, 2, inner='<Tie origin="true" destination="false"/>'),
        _note(2, 2, 2, inner='<Tie origin="false" destination="true"/>'),
        _note(3, 3, 7, bend),
        _note(4, 4, 5, _prop("Slide", "<Flags>2</Flags>") + _prop("HopoOrigin")),
        _note(5, 0, 0, _prop("PalmMuted"), inner="<LetRing/>"),
        _note(6, 1, 2, _prop("HopoOrigin")),
        _note(7, 5, 12, _prop("HarmonicType", "<HType>Natural</HType>"),
              inner="<Vibrato>Slight</Vibrato><AntiAccent>Normal</AntiAccent>"),
        _note(8, 0, 0, _prop("Muted")),
        _note(9, 5, 15, _prop("Tapped")),
        _note(10, 1, 5),  # piano
        _note(11, 0, 0),  # bass
        _note(12, 0, 0),  # drums
    ])
    beats = "".join([
        _beat(0, 0, "0", "<Dynamic>MF</Dynamic>"), _beat(1, 0, "1"), _beat(2, 0, "2"), _beat(3, 0, "3 4"),
        _beat(4, 1, "5"),
        _beat(5, 2, "6", "<GraceNotes>BeforeBeat</GraceNotes>"),
        _beat(6, 3, "7 8"), _beat(7, 4), _beat(8, 4, "9"), _beat(9, 0),
        _beat(10, 1, "10"), _beat(11, 1, "11"), _beat(12, 1, "12"),
    ])
    rhythms = ('<Rhythm id="0"><NoteValue>Quarter</NoteValue></Rhythm><Rhythm id="1"><NoteValue>Whole</NoteValue>'
               '</Rhythm><Rhythm id="2"><NoteValue>32nd</NoteValue></Rhythm><Rhythm id="3"><NoteValue>Eighth'
               '</NoteValue><AugmentationDot count="1"/></Rhythm><Rhythm id="4"><NoteValue>Eighth</NoteValue>'
               '<PrimaryTuplet num="3" den="2"/></Rhythm>')
    return (f'<?xml version="1.0" encoding="utf-8"?><GPIF><GPRevision>1</GPRevision>{score}'
            f'<MasterTrack><Tracks>0 1 2 3</Tracks><Automations>{tempos}</Automations></MasterTrack>'
            f'<Tracks>{tracks}</Tracks>'
            '<MasterBars><MasterBar><Time>4/4</Time><Bars>0 1 2 3</Bars></MasterBar>'
            '<MasterBar><Time>3/4</Time><Bars>4 -1 -1 -1</Bars></MasterBar></MasterBars>'
            '<Bars><Bar id="0"><Voices>0 1 -1 -1</Voices></Bar><Bar id="1"><Voices>4 -1 -1 -1</Voices></Bar>'
            '<Bar id="2"><Voices>5 -1 -1 -1</Voices></Bar><Bar id="3"><Voices>6 -1 -1 -1</Voices></Bar>'
            '<Bar id="4"><Voices>2 3 -1 -1</Voices></Bar></Bars>'
            '<Voices><Voice id="0"><Beats>0 1 2 3</Beats></Voice><Voice id="1"><Beats>4</Beats></Voice>'
            '<Voice id="2"><Beats>5 0 6 7 8</Beats></Voice><Voice id="3"><Beats>1 2 9</Beats></Voice>'
            '<Voice id="4"><Beats>10</Beats></Voice><Voice id="5"><Beats>11</Beats></Voice>'
            '<Voice id="6"><Beats>12</Beats></Voice></Voices>'
            f'<Beats>{beats}</Beats><Notes>{notes}</Notes><Rhythms>{rhythms}</Rhythms></GPIF>')


def write_gp(path: Path, xml: str | bytes, member: str = "Content/score.gpif", deflate: bool = True) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as zf:
        zf.writestr("VERSION", "7.0")
        zf.writestr(member, xml)
    return path


def write_gpx(path: Path, xml: str, compressed: bool = True) -> Path:
    container = bcfs({"score.gpif": xml.encode(), "misc.xml": b"<misc/>"})
    path.write_bytes(literal_bcfz(container) if compressed else container)
    return path


def rows(gs) -> list[tuple]:
    return [(n.time, n.duration, n.pitch, s, f) for n, (s, f) in zip(gs.track.notes, gs.frets)]


# (time, duration, pitch, string, fret) of the guitar part, by (time, pitch): pitch = open string + capo 2 + fret
EXPECTED = [
    (0, 2400, 40, 6, 0),  # palm-muted whole note, let ring until the dead note on its string
    (0, 480, 50, 5, 3),
    (480, 960, 54, 4, 2),  # tied over two beats: one note
    (1440, 480, 64, 3, 7),
    (1440, 480, 66, 2, 5),
    (1860, 60, 49, 5, 2),  # the grace note, before the beat
    (1920, 480, 50, 5, 3),  # beat 0 again
    (1920, 960, 54, 4, 2),  # beats 1 and 2 again: tied again, in this occurrence
    (2400, DEAD_NOTE_TICKS, 40, 6, 0),
    (2400, 360, 78, 1, 12),
    (2920, 160, 81, 1, 15),
]


# --------------------------------------------------------------------------------------------- the score

@pytest.mark.parametrize("kind", ["gp", "gpx", "gpx-stored"])
def test_tiny_score_in_every_container(tmp_path, kind):
    if kind == "gp":
        path = write_gp(tmp_path / "tiny.gp", gpif())
    else:
        path = write_gpx(tmp_path / "tiny.gpx", gpif(gp6=True), compressed=kind == "gpx")
    (gs,) = read_guitar(path)  # the piano carries frets but is no guitar; bass and drums left out
    assert gs.source_format == "gp6+" and gs.score.ticks_per_quarter == 480 and gs.name == "tiny"
    assert gs.tuning == (38, 45, 50, 55, 59, 64) and gs.capo == 2 and gs.track.program == 29
    assert rows(gs) == EXPECTED
    for note, (string, fret) in zip(gs.track.notes, gs.frets):
        assert note.pitch == gs.tuning[len(gs.tuning) - string] + gs.capo + fret
    assert [(t.time, round(t.qpm, 2)) for t in gs.score.tempos] == [(0, 120), (1920 + 720, 135)]  # 90 dotted quarters
    assert [(t.time, t.numerator, t.denominator) for t in gs.score.time_signatures] == [(0, 4, 4), (1920, 3, 4)]

    tech = dict(zip(((n.time, n.pitch) for n in gs.track.notes), gs.techniques))
    assert len(gs.techniques) == len(gs.track.notes)
    assert tech[(1440, 64)].bend == ((0, 0), (0.3, 4), (0.6, 4), (1, 0)) and tech[(1440, 64)].release
    assert tech[(1440, 66)] == Technique(slide_out="legato")  # its hammer-on leads nowhere: no note follows
    assert tech[(0, 40)] == Technique(palm_mute=True, let_ring=True)
    assert tech[(1860, 49)] == Technique()
    assert tech[(1920, 50)] == Technique(hammer=True)  # hammered from the grace note...
    assert not tech[(0, 50)]  # ...while the same beat in bar 1 is picked
    assert tech[(2400, 78)] == Technique(harmonic="natural", vibrato=True, ghost=True)
    assert tech[(2400, 40)] == Technique(dead=True) and tech[(2920, 81)] == Technique(tap=True)

    by_start = {(n.time, n.pitch): n for n in gs.track.notes}
    assert by_start[(2400, 40)].velocity == DEAD_NOTE_VELOCITY
    assert by_start[(0, 50)].velocity == 79 and by_start[(480, 54)].velocity == 95  # mf, then the default f
    assert by_start[(2400, 78)].velocity < 95  # ghost: softer
    bends = [(b.time, b.value) for b in gs.track.pitch_bends]
    assert (1440 + 144, 8191) in bends and bends[-1] == (1920, 0)  # 30% into the note; at rest when it ends


def test_tracks_all_and_bass(tmp_path):
    path = write_gp(tmp_path / "tiny.gp", gpif())
    assert [p.name for p in read_guitar(path, include_bass=True)] == ["tiny [Lead]", "tiny [Bass]"]
    parts = read_guitar(path, tracks="all")  # every pitched track, never the drums
    assert [p.extra["track_name"] for p in parts] == ["Lead", "Keys", "Bass"]
    keys = parts[1]
    assert rows(keys) == [(0, 1920, 50, 5, 5)] and keys.track.program == 0
    assert parts[2].tuning == (28, 33, 38, 43) and [n.pitch for n in parts[2].track.notes] == [28]


def test_gp_file_with_a_gp5_name_is_read_by_its_bytes(tmp_path):
    path = write_gp(tmp_path / "renamed.gp5", gpif())
    assert rows(read_guitar(path)[0]) == EXPECTED


def test_tempo_automations_past_the_last_bar_are_dropped(tmp_path):
    tempos = ('<Automation><Type>Tempo</Type><Bar>0</Bar><Position>0</Position><Value>100</Value></Automation>'
              '<Automation><Type>Tempo</Type><Bar>7</Bar><Position>0</Position><Value>200 2</Value></Automation>')
    (gs,) = read_guitar(write_gp(tmp_path / "t.gp", gpif(tempos=tempos)))
    assert [(t.time, round(t.qpm, 2)) for t in gs.score.tempos] == [(0, 100)]  # one number: quarter notes


@pytest.mark.parametrize("value", ["0.0001 2", "0", "-20 2", "nan 2"])
def test_near_zero_tempo_is_a_clear_error(tmp_path, value):
    tempos = f"<Automation><Type>Tempo</Type><Bar>1</Bar><Position>0</Position><Value>{value}</Value></Automation>"
    with pytest.raises(ValueError, match=r"t\.gp: tempo .* at bar 2 is near zero"):
        read_guitar(write_gp(tmp_path / "t.gp", gpif(tempos=tempos)))


def test_unreadable_tempo_is_a_clear_error(tmp_path):
    tempos = "<Automation><Type>Tempo</Type><Bar>x</Bar><Value>fast</Value></Automation>"
    with pytest.raises(ValueError, match="unreadable tempo automation"):
        read_guitar(write_gp(tmp_path / "t.gp", gpif(tempos=tempos)))


# --------------------------------------------------------------------------------------------- dirt

def test_locked_gpif_is_skipped_with_its_reason(tmp_path):
    path = write_gp(tmp_path / "locked.gp", bytes(range(256)) * 4)
    with pytest.raises(SkipFile, match="locked"):
        read_guitar(path)


@pytest.mark.parametrize("xml,match", [
    ("<GPIF><Tracks>", "not well-formed XML"),
    ("<score-partwise/>", "not <GPIF>"),
])
def test_bad_gpif_is_a_clear_error(tmp_path, xml, match):
    with pytest.raises(ValueError, match=match):
        read_guitar(write_gp(tmp_path / "bad.gp", xml))


def test_zip_without_a_score(tmp_path):
    with pytest.raises(ValueError, match="without Content/score.gpif"):
        read_guitar(write_gp(tmp_path / "x.gp", "<GPIF/>", member="Content/other.xml"))


def test_zip_cut_short(tmp_path):
    data = write_gp(tmp_path / "whole.gp", gpif()).read_bytes()
    (tmp_path / "cut.gp").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.gp: unreadable Guitar Pro 7/8 zip"):
        read_guitar(tmp_path / "cut.gp")


def test_zip_declaring_a_huge_score_is_refused_before_reading_it(tmp_path):
    path = write_gp(tmp_path / "bomb.gp", b"<" + b" " * (8 << 20))  # 8 MB of blanks deflate to a few KB
    with pytest.raises(ValueError, match="inflates to more than 1,677,800 bytes from a 8,389-byte file .over 200:1"):
        read_guitar(path)


def test_gpx_cut_short_is_a_clear_error(tmp_path):
    data = write_gpx(tmp_path / "whole.gpx", gpif(gp6=True)).read_bytes()
    (tmp_path / "cut.gpx").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="cut.gpx: unreadable Guitar Pro 6 container .*truncated"):
        read_guitar(tmp_path / "cut.gpx")


def test_gpx_declaring_far_more_than_it_holds_is_refused(tmp_path):
    (tmp_path / "big.gpx").write_bytes(b"BCFZ" + struct.pack("<i", 2**31 - 1) + bytes(100))
    with pytest.raises(ValueError, match="declares 2,147,483,647 bytes"):
        read_guitar(tmp_path / "big.gpx")


def test_gpx_without_a_score(tmp_path):
    (tmp_path / "x.gpx").write_bytes(literal_bcfz(bcfs({"misc.xml": b"<misc/>"})))
    with pytest.raises(ValueError, match="without a score.gpif"):
        read_guitar(tmp_path / "x.gpx")


def test_looping_references_stop(tmp_path):
    """A voice listing one beat two million times is refused, not ground through."""
    xml = gpif().replace("<Beats>5 0 6 7 8</Beats>", "<Beats>" + "0 " * 2_000_001 + "</Beats>")
    with pytest.raises(ValueError, match="more than 2,000,000 beats in one staff"):
        read_guitar(write_gp(tmp_path / "loop.gp", xml, deflate=False))


# --------------------------------------------------------------------------------------------- the container

def test_decompress_literals_and_an_overlapping_back_reference():
    # "abc" as a literal run, then 8 bytes copied from 3 back: the copy reads what it writes
    bits = "0" + "11" + "".join(f"{b:08b}" for b in b"abc")
    bits += "1" + "0100" + "1100" + "0001"  # w = 4; offset 3 and length 8, each lowest bit first
    data = b"BCFZ" + struct.pack("<i", 11) + bits_to_bytes(bits)
    assert decompress(data) == b"abcabcabcab"


def test_decompress_stops_where_the_input_ends():
    bits = "0" + "11" + "".join(f"{b:08b}" for b in b"xyz")
    assert decompress(b"BCFZ" + struct.pack("<i", 100) + bits_to_bytes(bits)) == b"xyz"


@pytest.mark.parametrize("bits,match", [
    ("1" + "0011" + "111" + "100", "back-reference 7 bytes back from byte 0"),
    ("1" + "0001" + "0" + "1", "back-reference 0 bytes back"),
])
def test_decompress_rejects_references_outside_the_output(bits, match):
    with pytest.raises(ValueError, match=match):
        decompress(b"BCFZ" + struct.pack("<i", 10) + bits_to_bytes(bits))


def test_decompress_bounds_the_declared_length():
    with pytest.raises(ValueError, match="declares"):
        decompress(b"BCFZ" + struct.pack("<i", 10**8) + bytes(1000))
    with pytest.raises(ValueError, match="declares -5 bytes"):
        decompress(b"BCFZ" + struct.pack("<i", -5))


def test_literal_container_round_trip():
    files = {"score.gpif": b"<GPIF/>" * 2000, "misc.xml": b"<misc/>"}
    assert gpx_files(literal_bcfz(bcfs(files))) == files
    assert read_bcfs(bcfs(files)) == files


def test_only_the_score_is_expanded():
    """The reader expands a .gpx only as far as score.gpif's last sector: a stream broken after it still reads
    (the whole stream does not)."""
    files = {"score.gpif": b"<GPIF/>", "BinaryStylesheet": bytes(5000)}
    data = literal_bcfz(bcfs(files), then="1" + "0001" + "0" + "1", declared=len(bcfs(files)) + 1)
    assert gpx_file(data) == b"<GPIF/>"
    with pytest.raises(ValueError, match="0 bytes back"):
        decompress(data)


def test_bcfs_entry_pointing_past_the_end():
    data = bytearray(bcfs({"score.gpif": b"x" * 10}))
    struct.pack_into("<i", data, 4 + SECTOR + 0x94, 99)  # its first data sector: 99 of 3
    with pytest.raises(ValueError, match="points at sector 99"):
        read_bcfs(bytes(data))


# --------------------------------------------------------------------------------------------- real files

def _real(pattern: str) -> list[Path]:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present (real-file tests need the shared data folder)")
    return sorted(p for p in SHARED.rglob(pattern) if p.is_file())


@pytest.mark.shared_data
def test_real_gpx_files_decompress_to_their_declared_length():
    """Every real .gpx expands to its declared length, give or take the last bytes (Guitar Pro's own files can
    end a step short: one here ends 2 bytes short, inside the last sector's padding)."""
    for path in _real("*.gpx"):
        data = path.read_bytes()
        out = decompress(data)
        assert out[:4] == b"BCFS" and 0 <= struct.unpack_from("<i", data, 4)[0] - len(out) < 8, path
        assert gpx_files(data)["score.gpif"].lstrip(b"\xef\xbb\xbf").startswith(b"<?xml"), path


@pytest.mark.shared_data
def test_serenade_reads_alike_from_gp6_and_gp7():
    base = SHARED / "alphatab" / "packages" / "alphatab" / "test-data"
    gp7, gp6 = base / "guitarpro7" / "serenade.gp", base / "guitarpro6" / "serenade.gpx"
    if not (gp7.is_file() and gp6.is_file()):
        pytest.skip("alphaTab's serenade test files are not in the shared data")
    a, b = read_guitar(gp7, tracks="all"), read_guitar(gp6, tracks="all")
    assert [p.extra["track_name"] for p in a] == ["Lead", "Rhythm", "Bass", "Keyboard"]
    assert sum(len(x.track.notes) for x in a) > 2000
    for x, y in zip(a, b):
        assert rows(x) == rows(y) and x.techniques == y.techniques
        assert [(t.time, t.qpm) for t in x.score.tempos] == [(t.time, t.qpm) for t in y.score.tempos]


def _bench_gpif():
    """benchmarks/bench_gpif.py, which pairs the twins (the test and the benchmark read the same pairs)."""
    spec = importlib.util.spec_from_file_location("bench_gpif", Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpif.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def twin_pairs(data: Path) -> list[tuple[Path, Path]]:
    return _bench_gpif().twin_pairs(data)


def _comparable(gs) -> list[tuple]:
    """A part's notes as (onset, duration, pitch, string, fret, technique). A bend is compared by its amounts at
    the start, the peak and the end: GP6-8 store a bend as at most four points (origin, middle, destination),
    GP3-5 as up to a dozen, so the points of one bend saved in both never match one for one."""
    out = []
    for n, (s, f), t in zip(gs.track.notes, gs.frets, gs.techniques):
        if t.bend:
            amounts = [a for _, a in t.bend]
            t = replace(t, bend=((0, amounts[0]), (0.5, max(amounts)), (1, amounts[-1])))
        out.append((n.time, n.duration, n.pitch, s, f, t))
    return out


# Twins that are not the same score, found by reading the files themselves (dumps of their beats), by
# "<folder>/<name>" of the GP6-8 file:
DIFFERENT_SCORES = {
    "test/volta": "the GP7/GP6 files hold four whole-note chords, the GP5 one a triplet arpeggio in 3/4",
    "test/trill": "the GP4 file has one note and three rests, the GP7/GP6 ones four notes",
    "test/slur": "the GP4 file has two notes and two rests, the GP7/GP6 ones four notes",
    "test/vibrato": "the GP5 file has whole notes, its GP7/GP6 twins quarter notes and rests (vibrato alike)",
    "test/fingering": "the GP7/GP6 files have one more note (bar 3, beat 4)",
    "test/fret-diagram": "the GP5 file has capo 6; the GP7/GP6 files have none (their Midi numbers agree)",
    "test/testIrrTuplet": "the GP4 file slides into the tied note, the GP7/GP6 files do not",
    "guitarpro6/beaming-mode": "the GP5 file repeats 6/3, the GP6 one climbs 6/1 .. 6/15",
    "guitarpro6/effects": "GP6 stores the tapped harmonic as artificial and one grace note as a 32nd (GP5: a 16th)",
    "guitarpro7/effects": "GP7 stores the tapped harmonic as artificial and one grace note as a 32nd (GP5: a 16th)",
}


def _key(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _read_or_skip(path: Path):
    try:
        return read_guitar(path)
    except SkipFile as e:
        return str(e)


@pytest.fixture(scope="module")
def twin_results() -> list[tuple[Path, Path, int, int, object, object]]:
    """(GP6-8 file, GP3-5 twin, agreeing notes, notes compared, old parts or skip reason, new ditto)."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present (real-file tests need the shared data folder)")
    results = []
    for new, old in twin_pairs(SHARED):
        a, b = _read_or_skip(old), _read_or_skip(new)
        agree = total = 0
        if not isinstance(a, str) and not isinstance(b, str):
            names = [p.extra["track_name"] for p in b]
            by_name = dict(zip(names, b))
            same_names = all(p.extra["track_name"] in by_name for p in a)
            pairs = [(p, by_name[p.extra["track_name"]]) for p in a] if same_names else list(zip(a, b))
            for pa, pb in pairs:
                ra, rb = _comparable(pa), _comparable(pb)
                agree += sum((Counter(ra) & Counter(rb)).values())
                total += max(len(ra), len(rb))
            unmatched = [p for p in a + b if all(p is not x and p is not y for x, y in pairs)]
            total += sum(len(p.track.notes) for p in unmatched)
        results.append((new, old, agree, total, a, b))
    if not results:
        pytest.skip("no GP6-8 files with GP3-5 twins in the shared data")
    return results


@pytest.mark.shared_data
def test_twins_read_alike(twin_results):
    """The same score saved as .gp/.gpx and as GP3-5 reads to the same notes: onset, duration, pitch, string,
    fret and technique. Every note of the pairs that hold one score agrees. Some "twins" are not one score (see
    DIFFERENT_SCORES: each checked against the files' own beats); counted in, >= 95% of the notes agree."""
    agree, total = sum(r[2] for r in twin_results), sum(r[3] for r in twin_results)
    same = [r for r in twin_results if _key(r[0]) not in DIFFERENT_SCORES]
    same_agree, same_total = sum(r[2] for r in same), sum(r[3] for r in same)
    print(f"\ntwins: {len(twin_results)} pairs, {agree}/{total} notes agree ({agree / total:.2%}); "
          f"pairs of one score: {same_agree}/{same_total} ({same_agree / same_total:.2%})")
    for new, old, a, t, _, _ in twin_results:
        if a < t:
            print(f"  {new.relative_to(SHARED)} vs {old.name}: {a}/{t} -- {DIFFERENT_SCORES.get(_key(new), '?')}")
    assert same_agree == same_total
    assert agree / total >= 0.95
    differing = {_key(r[0]) for r in twin_results if r[2] < r[3]}
    assert differing <= set(DIFFERENT_SCORES), differing - set(DIFFERENT_SCORES)


@pytest.mark.shared_data
def test_twins_skip_alike(twin_results):
    """Where one twin skips (no guitar notes), so does the other."""
    for new, _, _, _, a, b in twin_results:
        assert isinstance(a, str) == isinstance(b, str), (new, a if isinstance(a, str) else b)


@pytest.mark.shared_data
def test_real_gp6_to_8_files_read_or_skip_for_a_true_reason():
    files = _real("*.gp") + _real("*.gpx")
    outcomes = Counter()
    for path in files:
        got = _read_or_skip(path)
        if isinstance(got, str):
            assert got.startswith(("no guitar track", "no track but percussion", "no notes in the")), (path, got)
            outcomes["skip"] += 1
            continue
        assert all(len(p.frets) == len(p.techniques) == len(p.track.notes) > 0 for p in got), path
        outcomes["ok"] += 1
    print(f"\n.gp/.gpx: {dict(outcomes)} of {len(files)}")
    assert outcomes["ok"] + outcomes["skip"] == len(files)
    assert outcomes["ok"] / len(files) >= 0.75, outcomes
