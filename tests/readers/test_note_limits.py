"""Notes per part and per file are bounded right after a read: a MIDI of millions of notes (well under the file
size limit) is refused in one line naming the variable that raises the limit, on every path a user's file takes
(tab, infill, sample --prompt, prepare, the Python API); the studio's upload is in test_studio_api.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from guitarformer.errors import GuitarformerError
from guitarformer.readers import read_guitar
from guitarformer.readers.contained import read_guitar_contained
from guitarformer.readers.limits import ReadLimitError, ReadLimits, check_notes
from helpers import hostile_files as hostile
from helpers.reliability import ROOT, assert_clear_error, cli, gf

FIX = Path(__file__).parents[1] / "fixtures" / "io"
BAND = FIX / "band.mid"  # its guitar part: 6 notes; every part: 8


def test_limits_on_a_part_and_on_all_parts_together(monkeypatch):
    limits = ReadLimits(max_part_notes=10, max_song_notes=15)
    check_notes("a.mid", [10, 5], limits)  # at both limits: fine
    with pytest.raises(ReadLimitError, match="a part of 11 notes, past the 10-note") as e:
        check_notes("a.mid", [11], limits)
    assert e.value.limit == "GUITARFORMER_MAX_PART_NOTES" and "GUITARFORMER_MAX_PART_NOTES=20" in e.value.fix
    with pytest.raises(ReadLimitError, match="16 notes in its parts, past the 15-note") as e:
        check_notes("a.mid", [8, 8], limits)
    assert e.value.limit == "GUITARFORMER_MAX_SONG_NOTES"
    check_notes("a.mid", [10**7], ReadLimits(max_part_notes=0, max_song_notes=0))  # 0: no limit
    monkeypatch.setenv("GUITARFORMER_MAX_PART_NOTES", "7")
    assert ReadLimits.from_env().max_part_notes == 7 and ReadLimits.from_env().as_env()["GUITARFORMER_MAX_PART_NOTES"] == "7"
    monkeypatch.setenv("GUITARFORMER_MAX_SONG_NOTES", "many")
    with pytest.raises(GuitarformerError, match="GUITARFORMER_MAX_SONG_NOTES='many' is not a number"):
        ReadLimits.from_env()


def test_the_defaults_are_far_above_real_songs():
    """The largest part among the shared real files has 4,940 notes, the largest file 11,584 (docs/RELIABILITY.md)."""
    limits = ReadLimits()
    assert limits.max_part_notes >= 4 * 4_940 and limits.max_song_notes >= 3 * 11_584


def test_the_api_and_the_contained_read_refuse_past_the_limit(monkeypatch):
    assert [len(p.track.notes) for p in read_guitar(BAND)] == [6]
    monkeypatch.setenv("GUITARFORMER_MAX_PART_NOTES", "5")
    with pytest.raises(ReadLimitError, match="band.mid: a part of 6 notes"):
        read_guitar(BAND)
    with pytest.raises(ReadLimitError, match="GUITARFORMER_MAX_PART_NOTES=10"):
        read_guitar_contained(BAND)
    monkeypatch.setenv("GUITARFORMER_MAX_PART_NOTES", "6")
    monkeypatch.setenv("GUITARFORMER_MAX_SONG_NOTES", "7")
    assert len(read_guitar(BAND)) == 1  # the guitar view: 6 notes
    with pytest.raises(ReadLimitError, match="10 notes in its parts"):  # 6 guitar, 2 piano and 2 drum notes
        read_guitar(BAND, tracks="all")


def test_every_command_refuses_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GUITARFORMER_MAX_PART_NOTES", "5")
    for args in (("tab", BAND), ("infill", BAND, "--bars", "1-1", "--out", tmp_path / "x.mid"),
                 ("sample", "--prompt", BAND, "--out", tmp_path / "y.mid")):  # sample: the shipped model
        assert_clear_error(cli(*args), "GUITARFORMER_MAX_PART_NOTES=")
    assert not (tmp_path / "x.mid").exists() and not (tmp_path / "y.mid").exists()


def test_prepare_skips_the_file_and_says_why(tmp_path, cache_root, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "many.mid").write_bytes(hostile.midi_many_notes(30_000))
    (src / "small.gp5").write_bytes((FIX / "drop_d_capo.gp5").read_bytes())
    monkeypatch.setenv("GUITARFORMER_CACHE", str(cache_root))
    r = cli("prepare", src, "--out", tmp_path / "ds", "--workers", "1")
    assert r.exit_code == 0, r.output
    lines = {Path(d["path"]).name: d for d in map(json.loads, (tmp_path / "ds" / "manifest.jsonl").read_text().splitlines())}
    assert lines["small.gp5"]["status"] == "ok"
    assert lines["many.mid"]["status"] == "skipped"
    assert "a part of 30,000 notes" in lines["many.mid"]["reason"]
    assert "GUITARFORMER_MAX_PART_NOTES=" in lines["many.mid"]["reason"]


@pytest.mark.slow
def test_a_midi_of_two_million_notes_ends_in_one_line_at_once(tmp_path, cache_root):
    """The issue's file had ten million notes in 60 MB; `tab` ran 3 minutes, took 24 GB and was killed."""
    many = tmp_path / "notes.mid"
    many.write_bytes(hostile.midi_many_notes(2_000_000))
    t0 = time.monotonic()
    env = {**os.environ, "GUITARFORMER_CACHE": str(cache_root), "PYTHONPATH": str(ROOT)}
    r = gf("tab", many, cwd=tmp_path, env=env, timeout=120)
    assert time.monotonic() - t0 < 60
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "notes.mid: a part of 2,000,000 notes, past the 20,000-note read limit" in r.stderr
    assert "GUITARFORMER_MAX_PART_NOTES=3000000" in r.stderr


def test_musicxml_past_the_limit_is_refused_before_music21(tmp_path):
    """music21 takes about a millisecond a note: 45,000 notes (3.7 MB, under the text limit) ran past the read's
    60 s; counted on the parsed tree, they are refused at once."""
    xml = tmp_path / "notes.musicxml"
    xml.write_bytes(hostile.musicxml_many_notes(45_000))
    t0 = time.monotonic()
    with pytest.raises(ReadLimitError, match="notes.musicxml: a part of 45,000 notes") as e:
        read_guitar(xml)
    assert time.monotonic() - t0 < 20 and e.value.limit == "GUITARFORMER_MAX_PART_NOTES"
    small = tmp_path / "small.musicxml"
    small.write_bytes(hostile.musicxml_many_notes(40))
    assert [len(p.track.notes) for p in read_guitar(small)] == [40]
