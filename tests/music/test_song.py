"""The band: a Song of guitar, bass and drum parts, read from MIDI and Guitar Pro 3-8 and written back whole."""

from __future__ import annotations

from collections import Counter

import guitarpro
import pytest
import symusic

from guitarformer import read_song
from guitarformer.app.files import read_user_file, read_user_song
from guitarformer.app.infill import infill
from guitarformer.runs.run import load_run
from guitarformer.app.requests import InfillRequest, Outputs, SampleRequest
from guitarformer.app.sample import sample
from guitarformer.errors import GuitarformerError
from guitarformer.music.song import Song
from guitarformer.readers import read_guitar
from guitarformer.readers.contained import read_song_contained
from guitarformer.render.gp5 import write_gp5_parts
from guitarformer.render.midi import write_midi

MIDI_BAND = "miditok/tests/MIDIs_multitrack/All The Small Things.mid"
GP5_BAND = "pyguitarpro/tests/Demo v5.gp5"
GP7_BAND = "gp5-plugin/test_partial.gp"
FULL_SONG = "alphatab/packages/alphatab/test-data/conversion/full-song"  # .gp5, .gp and .gpx of one song


def hits(gs) -> Counter:
    return Counter((n.time, n.pitch) for n in gs.track.notes)


def _gp5_percussion_notes(path) -> int:
    """The notes PyGuitarPro finds on a file's percussion tracks (a tied note is the note it continues)."""
    song = guitarpro.parse(str(path))
    return sum(1 for t in song.tracks if t.isPercussionTrack for m in t.measures for v in m.voices for b in v.beats
               for n in b.notes if n.type != guitarpro.NoteType.tie)


def test_midi_song_has_guitars_bass_and_drums(shared_guitar):
    path = shared_guitar / MIDI_BAND
    src = symusic.Score(str(path))
    song = read_song(path)
    assert isinstance(song, Song) and song.name == "All The Small Things"
    assert song.roles == ["guitar"] * 3 + ["other"] + ["guitar"] * 4 + ["bass", "drums"]
    (drums,) = song.drums
    assert drums.is_drum and drums.tuning == () and drums.frets is None
    assert len(drums.track.notes) == sum(len(t.notes) for t in src.tracks if t.is_drum) == 1495
    assert [len(p.track.notes) for p in song.basses] == [len(t.notes) for t in src.tracks if t.program == 33] == [762]
    assert [p.program for p in song.guitars] == [26, 26, 26, 30, 28, 29, 30]
    assert song.tempos == src.tempos and song.time_signatures == src.time_signatures
    assert all(not p.is_drum for p in read_guitar(path, include_bass=True))  # the guitar view: no drums, as before


def test_gp5_song_reads_the_percussion_track_and_a_five_string_bass(shared_guitar):
    path = shared_guitar / GP5_BAND
    song = read_song(path)
    assert song.roles == ["guitar", "guitar", "other", "bass", "drums"]
    assert [p.extra["track_name"] for p in song.parts] == ["Rhythm Guitar", "Solo Guitar", "Melody", "Bass",
                                                           "Percussions"]
    (drums,) = song.drums
    assert len(drums.track.notes) == _gp5_percussion_notes(path) == 638
    assert set(hits(drums)) and {p for _, p in hits(drums)} <= set(range(35, 82))  # General MIDI kit pieces
    five = read_song(shared_guitar / "slundi-guitarpro/test/iron-maiden-doctor_doctor.gp5")
    assert five.roles == ["guitar", "guitar", "other", "bass", "drums"]
    assert five.basses[0].tuning == (23, 28, 33, 38, 43)  # the file's low B string, not a 4-string bass
    assert five.basses[0].tuning in [p.tuning for p in read_guitar(five.basses[0].extra["path"], include_bass=True)]


def test_gp7_song_reads_the_drum_kit_by_articulation(shared_guitar):
    song = read_song_contained(shared_guitar / GP7_BAND)  # the contained read gives the same Song
    assert song.roles == ["guitar", "guitar", "bass", "drums"]
    assert [len(p.track.notes) for p in song.parts] == [488, 4940, 1877, 2644]
    assert dict(Counter(n.pitch for n in song.drums[0].track.notes)) == {
        36: 845, 38: 680, 42: 420, 45: 84, 46: 440, 49: 89, 51: 86}


def test_one_song_in_gp5_gp7_and_gpx_has_the_same_drums(shared_guitar):
    """GP7 names each hit's articulation, GP6 only its kit element: both give the GP5 version's drum keys (GP6's
    floor tom, which it does not tell apart, is read as the low one)."""
    gp5, gp7, gpx = (read_song(shared_guitar / (FULL_SONG + suffix)) for suffix in (".gp5", ".gp", ".gpx"))
    assert gp5.roles == gp7.roles == gpx.roles and gp5.roles.count("drums") == 1
    assert hits(gp7.drums[0]) == hits(gp5.drums[0])
    want = set(hits(gp5.drums[0]))
    got = hits(gpx.drums[0])
    assert sum(got.values()) == 980  # the GP6 file has no tambourine track's worth of hits (54): the rest
    assert all((t, p) in want or (p == 41 and (t, 43) in want) for t, p in got)
    assert sum(n for (t, p), n in got.items() if (t, p) in want) >= 960


@pytest.mark.parametrize("rel", [MIDI_BAND, GP5_BAND, GP7_BAND])
def test_midi_round_trip_keeps_every_part_and_the_drums_on_channel_10(shared_guitar, tmp_path, rel):
    song = read_song(shared_guitar / rel)
    out = write_midi(song.parts, tmp_path / "band.mid")
    raw = out.read_bytes()
    assert b"\x99" in raw  # a note-on on channel 10
    drum_tracks = [t for t in symusic.Score(str(out)).tracks if t.is_drum]
    assert [len(t.notes) for t in drum_tracks] == [len(p.track.notes) for p in song.drums]
    back = read_song(out)
    assert back.roles == song.roles
    for a, b in zip(song.parts, back.parts):
        assert hits(a) == hits(b), a.name


@pytest.mark.parametrize("rel", [GP5_BAND, GP7_BAND, MIDI_BAND])
def test_gp5_round_trip_writes_a_percussion_track_our_reader_reads_back(shared_guitar, tmp_path, rel):
    song = read_song(shared_guitar / rel)
    out = tmp_path / "band.gp5"
    left_out = write_gp5_parts([(p, p.frets) for p in song.parts], out)
    assert all(not left for left in left_out)
    tracks = guitarpro.parse(str(out)).tracks
    assert [t.isPercussionTrack for t in tracks] == [p.is_drum for p in song.parts]
    drum = next(t for t in tracks if t.isPercussionTrack)
    assert drum.channel.channel == 9 and drum.channel.isPercussionChannel
    back = read_song(out)
    assert back.roles == song.roles
    for a, b in zip(song.parts, back.parts):
        assert len(b.track.notes) == len(a.track.notes), a.name
        assert Counter(n.pitch for n in b.track.notes) == Counter(n.pitch for n in a.track.notes), a.name
    if rel != MIDI_BAND:  # a Guitar Pro source is on GP5's grid already: every hit at its own tick
        assert hits(back.drums[0]) == hits(song.drums[0])


def test_a_drum_only_file_cannot_be_continued(tmp_path):
    score = symusic.Score(480)
    drums = symusic.Track("Kit", 0, True)
    drums.notes.extend(symusic.Note(k * 240, 120, (36, 42, 38, 42)[k % 4], 90) for k in range(16))
    score.tracks.append(drums)
    score.dump_midi(str(tmp_path / "kit.mid"))
    assert read_song(tmp_path / "kit.mid").roles == ["drums"]
    with pytest.raises(GuitarformerError, match="only drum parts"):
        read_user_file(tmp_path / "kit.mid", any_part=True)


def test_song_checks_its_grid_and_roles(shared_guitar):
    song = read_song(shared_guitar / GP5_BAND)
    with pytest.raises(ValueError, match="role must be one of"):
        song.by_role("vocals")
    other = read_song(shared_guitar / MIDI_BAND)  # 384 ticks per quarter, not 480
    assert other.ticks_per_quarter != song.ticks_per_quarter
    with pytest.raises(ValueError, match="share one grid"):
        Song(song.parts + other.parts)
    user = read_user_song(shared_guitar / GP5_BAND)
    assert [p.role for p in user.parts] == song.roles and user.part.role == "guitar" and user.choices == 2


@pytest.fixture(scope="module")
def shipped():
    return load_run(None, None, "cpu")


def test_sample_prompt_writes_the_files_drums_back(shipped, shared_guitar, tmp_path):
    src = shared_guitar / GP5_BAND
    song = read_song(src)
    out = Outputs(midi=tmp_path / "more.mid", gp=tmp_path / "more.gp5")
    r = sample(SampleRequest(outputs=out, prompt=src, bars=1, seed=0), shipped)
    assert "its 4 other parts as they were" in r.lines[-1]
    for path in (out.midi, out.gp):
        back = read_song(path)
        assert back.roles == song.roles, path.suffix
        assert hits(back.drums[0]) == hits(song.drums[0]), path.suffix
        bass = Counter(n.pitch for n in back.basses[0].track.notes)  # GP5 writes the bass's triplets on its grid
        assert bass == Counter(n.pitch for n in song.basses[0].track.notes), path.suffix
    assert hits(read_song(out.midi).basses[0]) == hits(song.basses[0])
    assert [t.is_drum for t in symusic.Score(str(out.midi)).tracks].count(True) == 1


def test_infill_keeps_the_drums_of_a_midi_song(shipped, tmp_path):
    score = symusic.Score(480)
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    score.tempos.append(symusic.Tempo(0, 100.0))
    guitar, drums = symusic.Track("Guitar", 29), symusic.Track("Kit", 0, True)
    guitar.notes.extend(symusic.Note(k * 240, 240, (40, 43, 45, 47)[k % 4], 90) for k in range(32))
    drums.notes.extend(symusic.Note(k * 240, 60, (36, 42, 38, 42)[k % 4], 100) for k in range(32))
    score.tracks.extend([guitar, drums])
    score.dump_midi(str(tmp_path / "band.mid"))
    before = read_song(tmp_path / "band.mid")
    assert before.roles == ["guitar", "drums"]
    out = Outputs(midi=tmp_path / "filled.mid", gp=tmp_path / "filled.gp5")
    r = infill(InfillRequest(song=tmp_path / "band.mid", bars=(2, 2), seed=0, outputs=out), shipped)
    assert "the other part as it was" in r.lines[-1]
    for path in (out.midi, out.gp):
        back = read_song(path)
        assert back.roles == ["guitar", "drums"], path.suffix
        assert hits(back.drums[0]) == hits(before.drums[0]), path.suffix
