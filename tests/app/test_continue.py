"""Continuations and fills keep the song: the prompt's meter and tempo in the new bars, every part of the file
written back, the new bars where the summary says; GP5 files carry a key signature, tab span lines never overlap."""

from __future__ import annotations

import re

import guitarpro
import pytest
import symusic

from guitarformer.app.infill import infill
from guitarformer.runs.run import load_run
from guitarformer.app.requests import InfillRequest, Outputs, SampleRequest
from guitarformer.app.sample import sample
from guitarformer.music.bars import bar_starts, signature_at
from guitarformer.music.score import GuitarScore, Technique
from guitarformer.readers import read_guitar
from guitarformer.render.ascii_tab import render_ascii_tab
from guitarformer.render.gp5 import key_signature, write_gp5

BAR = 1920  # a 4/4 bar at 480 ticks per quarter


@pytest.fixture(scope="module")
def shipped():
    return load_run(None, None, "cpu")


def _song(path, tracks, bars: int, tempo: float = 82.0, markers=()):
    """A 4/4 MIDI song: per track (name, program, pitches), an eighth-note line through `bars` bars (or its own
    bar count as a 4th item)."""
    s = symusic.Score(480)
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    s.tempos.append(symusic.Tempo(0, tempo))
    for name, program, pitches, *own in tracks:
        tr = symusic.Track(name=name, program=program)
        n = own[0] if own else bars
        tr.notes.extend(symusic.Note(k * 240, 240, pitches[k % len(pitches)], 90) for k in range(n * 8))
        s.tracks.append(tr)
    s.markers.extend(symusic.TextMeta(t, text) for t, text in markers)
    s.dump_midi(str(path))
    return path


GUITAR = ("Guitar", 25, [52, 55, 57, 59, 62, 64, 59, 57])
BASS = ("Bass", 33, [40, 40, 43, 45])
KEYS = ("Piano", 0, [64, 67, 71])


def _new_bar_meters(score: symusic.Score, new_from: int, count: int) -> list[tuple[int, int]]:
    starts = [t for t in bar_starts(score.time_signatures, score.ticks_per_quarter, new_from + 40 * BAR)
              if t >= new_from][:count]
    return [signature_at(score.time_signatures, score.ticks_per_quarter, t) for t in starts]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_continuation_keeps_the_prompts_meter_and_tempo(shipped, tmp_path, seed):
    song = _song(tmp_path / "song.mid", [GUITAR], 8)
    r = sample(SampleRequest(outputs=Outputs(midi=tmp_path / "more.mid"), prompt=song, bars=4, seed=seed), shipped)
    riff = r.riffs[0]
    assert riff.new_bars == 4
    got = symusic.Score(str(tmp_path / "more.mid"))
    assert _new_bar_meters(got, 8 * BAR, 4) == [(4, 4)] * 4
    assert [round(t.qpm) for t in got.tempos] == [82]
    assert [(t.numerator, t.denominator) for t in got.time_signatures] == [(4, 4)]
    new = [n for n in got.tracks[0].notes if n.time >= 8 * BAR]
    assert new and all(n.time < 12 * BAR for n in new)


def test_continued_and_filled_songs_keep_every_part(shipped, tmp_path):
    song = _song(tmp_path / "band.mid", [GUITAR, BASS, KEYS], 8)
    before = {gs.extra["track_name"]: [(n.time, n.pitch) for n in gs.track.notes]
              for gs in read_guitar(song, tracks="all")}
    out = Outputs(midi=tmp_path / "c.mid", gp=tmp_path / "c.gp5", tab=tmp_path / "c.txt")
    r = sample(SampleRequest(outputs=out, prompt=song, bars=2, seed=0), shipped)
    assert "its 2 other parts as they were" in r.lines[-1]
    f = infill(InfillRequest(song=song, bars=(3, 4), seed=0, candidates=2,
                             outputs=Outputs(midi=tmp_path / "f.mid", gp=tmp_path / "f.gp5")), shipped)
    assert "the 2 other parts as they were" in f.lines[-1]
    for path in (tmp_path / "c.mid", tmp_path / "f.mid"):
        parts = {gs.extra["track_name"]: gs for gs in read_guitar(path, tracks="all")}
        assert set(parts) == set(before)
        for name in ("Bass", "Piano"):  # the other parts exactly as they were
            assert [(n.time, n.pitch) for n in parts[name].track.notes] == before[name]
        assert [(n.time, n.pitch) for n in parts["Guitar"].track.notes] != before["Guitar"]
    assert len(guitarpro.parse(str(tmp_path / "c.gp5")).tracks) == 3
    assert len(guitarpro.parse(str(tmp_path / "f.gp5")).tracks) == 3
    assert "Tuning:" in (tmp_path / "c.txt").read_text()  # the tab: the continued part


def test_new_bars_follow_the_part_and_the_summary_says_where(shipped, tmp_path):
    """A guitar that stops at bar 4 of a 12-bar song is continued in bars 5-8, under the bass that goes on."""
    song = _song(tmp_path / "song.mid", [GUITAR + (4,), BASS], 12)
    r = sample(SampleRequest(outputs=Outputs(midi=tmp_path / "c.mid"), prompt=song, bars=4, seed=0), shipped)
    assert "4 from the prompt, 4 new: bars 5-8; its other part as it was, on to bar 12" in r.lines[-1]
    guitar = next(gs for gs in read_guitar(tmp_path / "c.mid", tracks="all") if gs.extra["track_name"] == "Guitar")
    new = [n.time for n in guitar.track.notes if n.time >= 4 * BAR]
    assert new and 4 * BAR <= min(new) and max(new) < 8 * BAR


def test_a_songs_later_markers_do_not_stretch_the_continuation(shipped, tmp_path):
    song = _song(tmp_path / "song.mid", [GUITAR], 6, markers=[(0, "Intro"), (40 * BAR, "Outro")])
    r = sample(SampleRequest(outputs=Outputs(midi=tmp_path / "c.mid"), prompt=song, bars=2, seed=0), shipped)
    assert r.lines[-1].split(": ", 1)[1].startswith("8 bars (6 from the prompt, 2 new: bars 7-8)")
    got = symusic.Score(str(tmp_path / "c.mid"))
    assert got.end() <= 8 * BAR and "Outro" not in [m.text for m in got.markers]


def test_shared_files_keep_meter_and_parts(shipped, shared_guitar, tmp_path):
    """Files whose continuation the model once wrote in other meters (seed 0), and a 10-part song."""
    for rel in ("pyguitarpro/tests/Chords.gp4", "slundi-guitarpro/test/ottava1.gpx",
                "alphatab/packages/alphatab/test-data/conversion/full-song.gp5"):
        src = shared_guitar / rel
        out = tmp_path / (src.stem + ".mid")
        r = sample(SampleRequest(outputs=Outputs(midi=out), prompt=src, bars=4, seed=0), shipped)
        first = read_guitar(src)[0].score
        want = signature_at(first.time_signatures, first.ticks_per_quarter, r.riffs[0].gs.extra[
            "generated_from_tick"] - 1)
        got = symusic.Score(str(out))
        assert _new_bar_meters(got, r.riffs[0].gs.extra["generated_from_tick"], 4) == [want] * 4, rel
        assert len(read_guitar(out, tracks="all")) == len(read_guitar(src, tracks="all")), rel


def _part(pitches, tuning=(40, 45, 50, 55, 59, 64)) -> GuitarScore:
    s = symusic.Score(480)
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    s.tempos.append(symusic.Tempo(0, 100))
    tr = symusic.Track(program=25)
    tr.notes.extend(symusic.Note(k * 240, 240, p, 90) for k, p in enumerate(pitches))
    s.tracks.append(tr)
    return GuitarScore(score=s, tuning=tuning)


@pytest.mark.parametrize("pitches, sharps", [
    ([52, 54, 55, 57, 59, 60, 62, 64] * 2, 1),  # E minor: F#
    ([50, 52, 54, 55, 57, 59, 61, 62] * 2, 2),  # D major: F#, C#
    ([48, 50, 52, 53, 55, 57, 59, 60] * 2, 0),  # C major
    ([53, 55, 57, 58, 60, 62, 64, 65] * 2, -1),  # F major: Bb
])
def test_gp5_files_carry_the_key_signature(tmp_path, pitches, sharps):
    gs = _part(pitches)
    assert key_signature([gs]) == sharps
    write_gp5(gs, tmp_path / "k.gp5")
    headers = guitarpro.parse(str(tmp_path / "k.gp5")).measureHeaders
    assert {h.keySignature.value for h in headers} == {(sharps, 0)}


def test_tab_span_labels_never_overlap():
    """Let-ring runs a note apart: each label whole, the second run's span in dashes where the first label ends."""
    s = symusic.Score(480)
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=25)
    flags = [True, False, True, True, False, False, True, False] * 2
    tr.notes.extend(symusic.Note(k * 120, 120, 64, 90) for k in range(len(flags)))
    s.tracks.append(tr)
    gs = GuitarScore(score=s, frets=[(1, 0)] * len(flags), techniques=[Technique(let_ring=f) for f in flags])
    text = render_ascii_tab(gs, width=120)
    spans = [line for line in text.splitlines() if "let" in line or "ring" in line]
    assert spans
    for line in spans:
        assert re.fullmatch(r" *let ring-*( +let ring-*| +-+)*", line), line
