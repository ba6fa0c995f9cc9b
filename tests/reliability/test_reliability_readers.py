"""Reliability of reading a user's file: hostile files (tests/helpers/hostile_files.py) end in one clear error within
bounded time and memory, in-process (the readers' own bounds) and through read_guitar_contained (a child process
with a memory cap and a time limit); prepare follows symlinks only inside its input folder and splits by piece."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from guitarformer.data.meta import summary_lines
from guitarformer.data.prepare import PrepareOptions, prepare
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.readers import contained, read_guitar
from guitarformer.readers.contained import read_guitar_contained
from guitarformer.readers.gpif import MAX_NOTES_PER_BEAT
from guitarformer.readers.limits import ReadLimitError, ReadLimits
from helpers import hostile_files as hostile

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "io"


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- the readers' own bounds


def test_a_note_id_listed_thousands_of_times_is_one_note(tmp_path):
    """A beat listing one note id 5,000 times, played 8,000 times, placed 40 million notes (3.7 GB) before."""
    path = write(tmp_path / "repeat.gp", hostile.gp_zip(hostile.gpif(bars=2000, beat_notes=" ".join(["0"] * 5000))))
    t0 = time.time()
    (gs,) = read_guitar(path)
    assert len(gs.track.notes) == 8000 and time.time() - t0 < 10


def test_a_beat_of_more_notes_than_a_stroke_holds_is_refused(tmp_path):
    ids = " ".join(str(i) for i in range(MAX_NOTES_PER_BEAT + 1))
    path = write(tmp_path / "wide.gp", hostile.gp_zip(hostile.gpif(beat_notes=ids)))
    with pytest.raises(ValueError, match=f"wide.gp: beat 0 lists {MAX_NOTES_PER_BEAT + 1} notes"):
        read_guitar(path)


def test_an_inflated_score_gpif_names_its_limit_and_the_variable_that_raises_it(tmp_path, monkeypatch):
    padding = "<!--" + os.urandom(3 << 19).hex() + "-->"  # 3 MB that deflates as XML does, not 1000:1
    path = write(tmp_path / "big.gp", hostile.gp_zip(hostile.gpif(extra=padding)))
    assert read_guitar(path)  # 3 MB: under the default 16 MB
    monkeypatch.setenv("GUITARFORMER_MAX_GPIF_MB", "2")
    with pytest.raises(ReadLimitError, match="big.gp: its score.gpif inflates to 3.0 MB, past the 2 MB read limit") as e:
        read_guitar(path)
    assert "GUITARFORMER_MAX_GPIF_MB=" in str(e.value)


@pytest.mark.parametrize("name, data", [
    ("bomb.gp", hostile.gp_zip(hostile.gpif(doctype=hostile.BILLION_LAUGHS, beat_notes="&lol9;"))),
    ("bomb.musicxml", hostile.musicxml(doctype=hostile.BILLION_LAUGHS, body="<work><work-title>&lol9;</work-title></work>")),
])
def test_xml_entities_are_refused_whatever_the_platforms_expat(tmp_path, name, data):
    with pytest.raises(ValueError, match=f"{name}: .* declares XML entities"):
        read_guitar(write(tmp_path / name, data))


def test_unclosed_tags_do_not_take_quadratic_time(tmp_path):
    path = write(tmp_path / "unclosed.gp", hostile.gp_zip(b"<GPIF>" + b'<Property name="ConcertPitch">x' * 30_000))
    t0 = time.time()
    with pytest.raises(ValueError, match="not well-formed XML"):
        read_guitar(path)
    assert time.time() - t0 < 5  # a full minute before


def test_text_lines_opening_with_long_blank_runs_do_not_take_cubic_time(tmp_path):
    """A line that is no tab line, opening with many blanks: the label pattern retried its three whitespace runs
    every way (4,000 blanks took 166 s before)."""
    path = write(tmp_path / "blanks.txt", hostile.tab_after_blanks(blanks=20_000, lines=20))
    t0 = time.time()
    (gs,) = read_guitar(path)
    assert time.time() - t0 < 5 and len(gs.track.notes) == 30


def test_an_inflated_mxl_is_refused_before_music21_sees_it(tmp_path, monkeypatch):
    from guitarformer.readers.notation import _musicxml_bytes

    path = write(tmp_path / "big.mxl", hostile.mxl(hostile.musicxml(measures=250, notes_per_measure=16)))
    assert len(_musicxml_bytes(path, ReadLimits())) > 300_000  # unpacked under the default limit
    monkeypatch.setenv("GUITARFORMER_MAX_TEXT_MB", "0.25")
    with pytest.raises(ReadLimitError, match="the MusicXML inside it holds .* MB of text, more than the 0.25 MB"):
        read_guitar(path)


def test_a_flipped_bit_in_deflated_data_is_one_error(tmp_path):
    data = bytearray(hostile.mxl(hostile.musicxml(measures=40)))
    data[len(data) // 3] ^= 0x10  # inside the deflated score
    with pytest.raises(ValueError, match="flip.mxl: unreadable zip"):
        read_guitar(write(tmp_path / "flip.mxl", bytes(data)))


def test_musicxml_without_parts_is_one_skip(tmp_path):
    with pytest.raises(SkipFile, match="MusicXML without any <part>"):
        read_guitar(write(tmp_path / "empty.musicxml", hostile.musicxml(parts=False)))


@pytest.mark.slow
def test_a_tab_past_the_text_limit_and_one_of_too_many_notes(tmp_path, monkeypatch):
    wide = write(tmp_path / "wide.txt", hostile.ascii_tab(staves=1, width=400_000))
    with pytest.raises(ValueError, match="wide.txt: more than 100,000 notes in one tab"):
        read_guitar(wide)
    monkeypatch.setenv("GUITARFORMER_MAX_TEXT_MB", "1")
    with pytest.raises(ReadLimitError, match="GUITARFORMER_MAX_TEXT_MB=") as e:
        read_guitar(wide)
    assert "the tab holds 2.3 MB of text, more than the 1 MB read limit" in str(e.value)


@pytest.mark.parametrize("kwargs, match", [
    ({"time": "128/1"}, "time signature 128/1 at tick 0 makes a bar of 512 quarter notes"),
    ({"time": "1/128"}, "time signature 1/128"),
    ({"tempo": "0"}, "tempo 0 at bar 1 is near zero"),
])
def test_timing_that_makes_a_bar_zero_or_huge_is_one_error(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        read_guitar(write(tmp_path / "t.gp", hostile.gp_zip(hostile.gpif(**kwargs))))


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path, monkeypatch):
    path = write(tmp_path / "a.mid", (FIX / "band.mid").read_bytes() + b"\0" * (2 << 20))
    monkeypatch.setenv("GUITARFORMER_MAX_FILE_MB", "1")
    with pytest.raises(ReadLimitError, match=r"a.mid: file too large \(2.0 MB > the 1 MB read limit\)"):
        read_guitar(path)


# ---------------------------------------------------------------- the contained read


def test_contained_read_gives_the_same_parts(tmp_path):
    here, there = read_guitar(FIX / "drop_d_capo.gp5"), read_guitar_contained(FIX / "drop_d_capo.gp5")
    assert [p.track.notes for p in here] == [p.track.notes for p in there]
    assert [p.frets for p in here] == [p.frets for p in there] and there[0].techniques == here[0].techniques


def _spin(*args, **kwargs):
    while True:
        pass


def _hog(*args, **kwargs):
    return [bytearray(3 << 30)]


def _segfault(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGSEGV)


def _buggy(*args, **kwargs):
    raise AttributeError("'Score' object has no attribute 'partName'")


@pytest.mark.parametrize("reader, error, match", [
    (_spin, ReadLimitError, "took longer than the 1 s read limit .*GUITARFORMER_READ_TIMEOUT_S=4"),
    (_hog, ReadLimitError, "needed more than the 256 MB read memory limit .*GUITARFORMER_READ_MEMORY_MB=512"),
    (_segfault, GuitarformerError, "the reader crashed reading it .it was killed by signal 11"),
    (_buggy, GuitarformerError, r"band.mid is not readable music \(AttributeError: 'Score' object has no attribute"),
])
def test_contained_read_turns_every_failure_into_one_error(monkeypatch, reader, error, match):
    monkeypatch.setattr(contained, "_start_method", lambda: "fork")  # (other tests may have left threads running)
    monkeypatch.setattr(contained, "read_guitar", reader)  # the forked child inherits the patch
    t0 = time.time()
    with pytest.raises(error, match=match):
        read_guitar_contained(FIX / "band.mid", limits=ReadLimits(timeout_s=1, memory_mb=256))
    assert time.time() - t0 < 10


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_a_limit_inside_the_child_comes_back_as_the_same_error(tmp_path, monkeypatch, method):
    """The limits travel to the child whichever way it starts (a fork server keeps the environment it began with)."""
    monkeypatch.setattr(contained, "_start_method", lambda: method)
    path = write(tmp_path / "song.gp", hostile.gp_zip(hostile.gpif(extra="<!--" + "ab" * 40_000 + "-->")))
    assert read_guitar_contained(path)[0].track.notes
    with pytest.raises(ReadLimitError, match="song.gp: its score.gpif inflates to 0.1 MB, past the 0.05 MB") as e:
        read_guitar_contained(path, limits=ReadLimits(max_gpif_mb=0.05))
    assert e.value.limit == "GUITARFORMER_MAX_GPIF_MB" and "GUITARFORMER_MAX_GPIF_MB=0.1" in e.value.fix


def test_contained_read_says_skip_and_limits_before_starting_a_child(tmp_path):
    with pytest.raises(SkipFile, match="no track but percussion"):
        read_guitar_contained(FIX / "drums_only.mid")
    with pytest.raises(ReadLimitError, match="file too large"):
        read_guitar_contained(FIX / "band.mid", limits=ReadLimits(max_file_mb=0.0001))
    with pytest.raises(SkipFile, match="binary file, not text"):
        read_guitar_contained(write(tmp_path / "x.txt", b"\x7fELF" + bytes(range(256)) * 4))
    with pytest.raises(GuitarformerError, match="does not exist"):
        read_guitar_contained(tmp_path / "missing.gp5")


# ---------------------------------------------------------------- prepare: symlinks, pieces, empty splits


def _manifest(out: Path) -> dict[str, dict]:
    return {Path(d["path"]).name: d for d in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}


def test_symlinks_are_followed_only_inside_the_input_folder(tmp_path, cache_root):
    src, outside = tmp_path / "in", tmp_path / "elsewhere"
    src.mkdir(), outside.mkdir()
    write(src / "riff.gp5", (FIX / "drop_d_capo.gp5").read_bytes())
    write(outside / "secret.mid", (FIX / "band.mid").read_bytes())
    (src / "inside.gp4").symlink_to(FIX.parent.parent / "fixtures" / "io" / "drop_d_capo.gp4")  # out: the repo
    (src / "escape.mid").symlink_to(outside / "secret.mid")
    (src / "sub").mkdir()
    (src / "sub" / "local.gp5").symlink_to(src / "riff.gp5")  # inside: the same file, read once
    prepare([src], tmp_path / "ds", options=PrepareOptions(workers=1, progress=False))
    lines = _manifest(tmp_path / "ds")
    assert lines["escape.mid"]["status"] == "skipped" and "outside the input folder" in lines["escape.mid"]["reason"]
    assert lines["inside.gp4"]["status"] == "skipped" and str(outside) not in lines["inside.gp4"]["reason"]
    assert lines["riff.gp5"]["status"] == "ok" and "local.gp5" not in lines  # one file, one line


def test_one_score_in_several_formats_is_one_piece_in_one_split(tmp_path, cache_root):
    src = tmp_path / "in"
    src.mkdir()
    for suffix in ("gp3", "gp4", "gp5"):
        write(src / f"song.{suffix}", (FIX / f"drop_d_capo.{suffix}").read_bytes())
    write(src / "other.mid", (FIX / "band.mid").read_bytes())
    meta = prepare([src], tmp_path / "ds", options=PrepareOptions(workers=1, progress=False))
    lines = _manifest(tmp_path / "ds")
    song = [lines[f"song.{s}"] for s in ("gp3", "gp4", "gp5")]
    assert len({d["piece"] for d in song}) == 1 and len({d["split"] for d in song}) == 1
    assert lines["other.mid"]["piece"] != song[0]["piece"]
    # the same notes are read once: from the richest format (GP5 keeps the most techniques)
    assert [d["status"] for d in song] == ["skipped", "skipped", "ok"]
    assert song[0]["reason"] == f"same notes as {src / 'song.gp5'} (read once)"
    assert meta["pieces"] == 2 and sum(meta["sequences"].values()) == 2


def test_same_name_in_one_folder_joins_a_piece_even_where_readers_differ(tmp_path, cache_root):
    src = tmp_path / "in"
    src.mkdir()
    write(src / "tune.mid", (FIX / "band.mid").read_bytes())
    write(src / "tune.gp5", (FIX / "drop_d_capo.gp5").read_bytes())  # other notes, one name: kept, one split
    prepare([src], tmp_path / "ds", options=PrepareOptions(workers=1, progress=False))
    lines = _manifest(tmp_path / "ds")
    assert lines["tune.mid"]["status"] == lines["tune.gp5"]["status"] == "ok"
    assert lines["tune.mid"]["piece"] == lines["tune.gp5"]["piece"]
    assert lines["tune.mid"]["split"] == lines["tune.gp5"]["split"]


def test_more_strings_than_the_tab_tokens_hold_is_one_manifest_line(tmp_path, cache_root):
    src = tmp_path / "in"
    src.mkdir()
    nine = hostile.gpif().replace(b"40 45 50 55 59 64", b"30 35 40 45 50 55 59 64 69")
    write(src / "nine.gp", hostile.gp_zip(nine))
    prepare([src], tmp_path / "ds", options=PrepareOptions(workers=1, progress=False, tracks="all"))
    line = _manifest(tmp_path / "ds")["nine.gp"]
    assert line["status"] == "skipped" and "a 9-string tuning: the tab tokens name at most 8 strings" in line["reason"]


def test_an_empty_split_is_warned_about():
    meta = {"name": "ds", "files": 1, "status": {"ok": 1}, "by_format": {}, "vocab_size": 9, "tokenizer": "TabREMI",
            "tokens": {"train": 100, "val": 0, "test": 0}, "sequences": {"train": 1, "val": 0, "test": 0}}
    warning = [line for line in summary_lines(meta) if line.startswith("warning")]
    assert warning and "the val and test splits are empty (0 tokens)" in warning[0]
