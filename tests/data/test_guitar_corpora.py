"""The guitar corpora built into the package: Freedoom's rock guitar parts and Mutopia's classical pieces."""

from __future__ import annotations

import csv
import hashlib

import pytest
import symusic

from guitarformer.data.guitar_corpora import (
    FREEDOOM,
    MUTOPIA,
    TEST_LICENCES,
    TRAIN_LICENCES,
    classical_credits,
    classical_files,
    drop_doubles,
    rock_score,
)
from guitarformer.music.guitar import TUNINGS, tuning_for_lowest
from guitarformer.readers import read_guitar


def _midi(tmp_path, tracks: list[tuple[int, list[int]]], name="x.mid"):
    score = symusic.Score(480)
    for program, pitches in tracks:
        t = symusic.Track(program=program)
        for i, p in enumerate(pitches):
            t.notes.append(symusic.Note(i * 240, 240, p, 90))
        score.tracks.append(t)
    path = tmp_path / name
    score.dump_midi(str(path))
    return path


def test_a_muted_guitar_track_reads_as_palm_muted_notes(tmp_path):
    path = _midi(tmp_path, [(28, [40, 40, 47, 52]), (30, [52, 55, 57])])
    muted, plain = read_guitar(path)
    assert muted.techniques is not None and all(t.palm_mute for t in muted.techniques)
    assert len(muted.techniques) == len(muted.track.notes)
    assert plain.techniques is None or not any(t.palm_mute for t in plain.techniques)


@pytest.mark.parametrize("lowest, tuning", [(40, "standard"), (38, "drop-d"), (39, "drop-d"), (36, "drop-c"),
                                            (35, "seven-string"), (52, "standard")])
def test_a_midi_part_is_read_in_the_tuning_its_lowest_note_needs(tmp_path, lowest, tuning):
    assert tuning_for_lowest(lowest) == TUNINGS[tuning]
    gs = read_guitar(_midi(tmp_path, [(30, [lowest, lowest + 7, lowest + 12])]))[0]
    assert gs.tuning == TUNINGS[tuning]


def test_doubled_tracks_are_dropped_and_low_parts_moved_onto_the_neck(tmp_path):
    riff = [33, 40, 45, 33, 40, 45]  # A1: below a 7-string's B1
    path = _midi(tmp_path, [(30, riff), (29, riff), (33, [28, 30]), (30, [60, 62])])
    score = rock_score(path)
    pitches = sorted(sorted(n.pitch for n in t.notes) for t in score.tracks)
    assert pitches == [sorted(p + 12 for p in riff), [60, 62]]  # the doubled track gone, the bass left out
    a = symusic.Track(program=30)
    a.notes.append(symusic.Note(0, 10, 60, 90))
    assert len(drop_doubles([a, a.copy()])) == 1


def test_freedoom_ships_with_its_licence_credits_and_checksums():
    files = sorted(FREEDOOM.glob("*.mid"))
    assert len(files) == 112
    assert (FREEDOOM / "COPYING.adoc").read_text().count("Redistribution") >= 1
    assert (FREEDOOM / "CREDITS-MUSIC").is_file()
    sums = dict(reversed(line.split("  ")) for line in (FREEDOOM / "FILES.sha256").read_text().splitlines())
    assert all(sums[f.name] == hashlib.sha256(f.read_bytes()).hexdigest() for f in files)
    parts = read_guitar(FREEDOOM / "d_map23.mid")
    assert any(gs.techniques and all(t.palm_mute for t in gs.techniques) for gs in parts)


def test_every_rendered_classical_file_has_its_credit_and_licence():
    with open(MUTOPIA / "CREDITS.tsv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert len(rows) > 100
    on_disk = {p.relative_to(MUTOPIA).as_posix() for p in MUTOPIA.glob("*/*.mid")}
    assert on_disk == {r["file"] for r in rows}
    assert all(r["composer"] and r["title"] and r["mutopia_id"] and r["license"] for r in rows)
    assert all(r["file"].startswith(r["license_class"] + "/") for r in rows)
    train = classical_files(TRAIN_LICENCES)
    assert train and all(p.parent.name in TRAIN_LICENCES for p in train)
    assert not set(classical_files(TEST_LICENCES)) & set(train)  # CC-BY-SA: a test set, never built in
    assert {r["license_class"] for r in classical_credits()} <= set(TRAIN_LICENCES)


def test_no_corpus_file_passes_two_megabytes():
    big = [p for p in (FREEDOOM.parent).rglob("*") if p.is_file() and p.stat().st_size > 2 * 1024 * 1024]
    assert not big
