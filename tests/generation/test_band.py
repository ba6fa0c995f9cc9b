"""The band: songs of parts as one token stream (data/parts.py, data/song_tokens.py), sampled under the band
constraint (generation/band_constraint.py), from nothing and as accompaniment, and written whole (app/band.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import symusic
from click.testing import CliRunner

from guitarformer.cli import main
from guitarformer.config import DataConfig
from guitarformer.data.guitar_corpora import FREEDOOM
from guitarformer.vocab.parts import KIT, band_roles
from guitarformer.data.band import pick_parts
from guitarformer.vocab.song_tokens import decode_song, encode_song, part_ids, split_song
from guitarformer.vocab.tokenization import band_tokenizer, build_tokenizer, load_tokenizer, tokens_differ
from guitarformer.compose.band import BandAsk, accompany_rows, band_parts, band_rows
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.music.bars import count_bars
from guitarformer.music.guitar import BASS_TUNING, MAX_FRET, STANDARD_TUNING, fret_of
from guitarformer.pretrained import pretrained_dir
from guitarformer.readers import read_song
from guitarformer.runs import load_run
from helpers.tiny_runs import untrained_run

ROLES = ("guitar", "bass", "drums")
SONGS = ("d_dm01.mid", "d_dm02.mid", "d_bunny.mid")  # Freedoom arrangements inside the package (BSD-3)
TUNINGS = {"guitar": (STANDARD_TUNING, 0), "bass": (BASS_TUNING, 0)}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(DataConfig(controls=True, infill=0.3, parts="guitar,bass,drums"), styles=["rock"])


@pytest.fixture(scope="module")
def songs():
    return {name: pick_parts(read_song(FREEDOOM / name), ROLES) for name in SONGS}


def test_a_band_tokenizer_keeps_every_id_of_the_single_part_one():
    shipped = load_tokenizer(pretrained_dir() / "tokenizer.json")
    band = band_tokenizer(shipped, ROLES)
    assert band_roles(band) == list(ROLES) and band_roles(shipped) is None
    assert all(band.vocab[t] == i for t, i in shipped.vocab.items())
    assert len(band) == len(shipped) + 3 + len(KIT)
    assert tokens_differ(shipped, band) is None  # a single-part run fine-tunes on band data, its embedding grown


def test_every_part_comes_back_note_for_note(tok, songs):
    for name, parts in songs.items():
        ids = encode_song(tok, parts, style="rock")
        back = dict(decode_song(tok, ids, {r: (gs.tuning, gs.capo) for r, gs in parts if r != "drums"}))
        assert [r for r, _ in parts] == list(ROLES), name
        for role, gs in parts:
            # what the tokens keep: the notes after the tokenizer's own quantisation (unisons on a grid merge)
            kept = len(tok.preprocess_score(gs.score).tracks[0].notes) if role != "drums" else len(
                {(round(n.time * 8 / gs.score.ticks_per_quarter), n.pitch) for n in gs.track.notes})
            assert len(back[role].track.notes) == pytest.approx(kept, rel=0.02), (name, role)
        pitches = sorted(n.pitch for n in back["drums"].track.notes)
        assert set(pitches) <= set(KIT) and back["drums"].is_drum


def test_the_band_stream_costs_no_more_than_its_parts_alone(tok, songs):
    band = sum(len(encode_song(tok, parts)) for parts in songs.values())
    alone = sum(len(part_ids(tok, r, gs)) + 2 for parts in songs.values() for r, gs in parts)
    assert band <= alone


def test_each_bar_holds_every_part_in_order_and_the_parts_are_as_long(tok, songs):
    parts = songs["d_dm01.mid"]
    ids = encode_song(tok, parts)
    toks = [tok[i] for i in ids]
    bars = "|".join(toks).split("Bar_None")[1:]
    assert bars and all([t for t in b.split("|") if t.startswith("Part_")] == ["Part_guitar", "Part_bass",
                                                                               "Part_drums"] for b in bars)
    views = split_song(tok, ids)
    assert {v.count(tok.vocab["Bar_None"]) for v in views.values()} == {len(bars)}
    # the meter is written once a bar, in its first part
    assert all(sum(t.startswith("TimeSig_") for t in b.split("|")) <= 1 for b in bars)


def test_the_order_of_parts_is_the_streams_own(tok, songs):
    parts = list(reversed(songs["d_dm02.mid"]))  # drums, bass, guitar: a guitar part written for a groove
    ids = encode_song(tok, parts)
    first_bar = "|".join(tok[i] for i in ids).split("Bar_None")[1].split("|")
    assert [t for t in first_bar if t.startswith("Part_")] == ["Part_drums", "Part_bass", "Part_guitar"]
    back = dict(decode_song(tok, ids))
    assert len(back["guitar"].track.notes) == len(dict(decode_song(tok, encode_song(tok, songs["d_dm02.mid"])))[
        "guitar"].track.notes)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tok):
    return untrained_run(tmp_path_factory.mktemp("band") / "run", tok, block_size=512, seed=3)


@pytest.fixture(scope="module")
def tiny(tiny_run):
    run = load_run(tiny_run)
    return run.model, run.tokenizer, run.cfg


def _playable(gs) -> bool:
    """Every note on a string of the part's tuning, within the frets, one note at a time per string (a note may
    ring into the next on its string by a 32nd at most, as the constraint lets legato notes do)."""
    grace = gs.score.ticks_per_quarter // 8
    ends: dict[int, int] = {}
    for note, (s, f) in sorted(zip(gs.track.notes, gs.frets), key=lambda x: x[0].time):
        if not (1 <= s <= len(gs.tuning) and 0 <= f <= MAX_FRET and fret_of(note.pitch, s, gs.tuning) == f):
            return False
        if ends.get(s, -1) > note.time + grace:
            return False
        ends[s] = note.time + note.duration
    return True


def test_a_band_riff_from_nothing_has_every_part_playable_and_as_long(tiny):
    model, tok, _ = tiny
    ask = BandAsk(list(ROLES), TUNINGS, num=3, seed=5)
    rows = band_rows(model, tok, ask, SamplingParams(max_new_tokens=3000, max_bars=3))
    for row in rows:
        assert row[-1] == tok["EOS_None"]
        toks = [tok[i] for i in row]
        bars = "|".join(toks).split("Bar_None")[1:]
        assert len(bars) == 3
        for b in bars:
            assert [t for t in b.split("|") if t.startswith("Part_")] == ["Part_guitar", "Part_bass", "Part_drums"]
        parts = dict(band_parts(tok, row, ask, tempo=120))
        assert set(parts) == set(ROLES)
        for role in ("guitar", "bass"):
            gs = parts[role]
            assert gs.frets and _playable(gs), role
        assert all(n.pitch in KIT for n in parts["drums"].track.notes)
        for gs in parts.values():  # nothing rings past the third bar
            sc = gs.score
            assert count_bars(sc.time_signatures, sc.ticks_per_quarter, sc.end()) <= 3


def test_accompaniment_keeps_the_given_part_and_writes_the_others_bar_by_bar(tiny, songs):
    model, tok, _ = tiny
    guitar = [p for p in songs["d_dm01.mid"] if p[0] == "guitar"]
    ask = BandAsk(["guitar", "bass", "drums"], TUNINGS, num=1, seed=2)
    row = accompany_rows(model, tok, ask, guitar, SamplingParams(max_new_tokens=400, max_bars=3), block_size=512)[0]
    given = encode_song(tok, guitar)
    views, given_view = split_song(tok, row), split_song(tok, given)
    bar = tok.vocab["Bar_None"]
    # the guitar's first three bars exactly as the file's tokens
    cut = [k for k, i in enumerate(given_view["guitar"]) if i == bar][3]
    assert views["guitar"][:-1] == given_view["guitar"][:cut]
    assert set(views) == set(ROLES) and views["bass"].count(bar) == 3


def test_sample_parts_and_accompany_from_the_command_line(tiny_run, tmp_path, songs):
    out = tmp_path / "band"
    r = CliRunner().invoke(main, ["sample", "--run", str(tiny_run), "--parts", "guitar,bass,drums", "--bars", "2",
                                  "--out", str(out / "band.mid"), "--gp", str(out / "band.gp5"),
                                  "--tab", str(out / "band.txt")])
    assert r.exit_code == 0, r.output
    midi = symusic.Score(str(out / "band.mid"))
    played = [t for t in midi.tracks if len(t.notes)]
    assert sum(t.is_drum for t in played) == 1  # on channel 10
    assert {t.program for t in played if not t.is_drum} == {25, 33}  # steel guitar and electric bass (bends: own tracks)
    song = read_song(out / "band.gp5")
    assert sorted(gs.role for gs in song.parts) == ["bass", "drums", "guitar"]
    tab = (out / "band.txt").read_text()
    assert "E1 A1 D2 G2" in tab and "E2 A2 D3 G3 B3 E4" in tab
    from guitarformer.render.midi import write_midi

    write_midi([dict(songs["d_dm02.mid"])["guitar"]], tmp_path / "riff.mid")
    r = CliRunner().invoke(main, ["sample", "--run", str(tiny_run), "--accompany", str(tmp_path / "riff.mid"),
                                  "--bars", "2", "--out", str(out / "acc.mid")])
    assert r.exit_code == 0, r.output
    assert "guitar" in r.output and "bass" in r.output and "drums" in r.output


def test_band_options_are_refused_where_they_cannot_work(tmp_path):
    r = CliRunner().invoke(main, ["sample", "--run", str(pretrained_dir()), "--parts", "guitar,bass,drums",
                                  "--out", str(tmp_path / "x.mid")])
    assert r.exit_code != 0 and "carry one part" in r.output
    r = CliRunner().invoke(main, ["sample", "--parts", "guitar,keys", "--out", str(tmp_path / "x.mid")])
    assert r.exit_code != 0 and "no part named 'keys'" in r.output
