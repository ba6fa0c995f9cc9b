"""vocab/seen.py: what a run's training data held per control, and the values a run counts as learned."""

from __future__ import annotations

import json

import pytest

from guitarformer.runs.run import load_run, seen_of_run
from guitarformer.config import DataConfig
from guitarformer.vocab.seen import MIN_SEEN, SEEN_FILE, Seen, from_vocabulary, read_seen, summarize, write_seen
from guitarformer.vocab.tokenization import build_tokenizer


@pytest.fixture(scope="module")
def tok():
    cfg = DataConfig(tokenizer="TabREMI", controls=True)
    return build_tokenizer(cfg, ["jig", "reel"])


def _piece(tok, style: str, meter: str, bars: int, density: str = "mid") -> list[int]:
    v = tok.vocab
    ids = [v["BOS_None"], v["CtrlTuning_standard"], v["CtrlKey_D:major"], v[f"CtrlStyle_{style}"]]
    for _ in range(bars):
        ids += [v["Bar_None"], v[f"CtrlDensity_{density}"], v["CtrlPoly_single"], v[f"TimeSig_{meter}"],
                v["Position_0"], v["Pitch_62"], v["Duration_1.0.8"], v["String_3"]]
    return ids + [v["EOS_None"]]


def test_counts_pieces_bars_meters_and_styles(tok):
    pieces = [_piece(tok, "jig", "6/8", 3), _piece(tok, "jig", "6/8", 2, "high"), _piece(tok, "reel", "4/4", 4)]
    seen = summarize(tok.vocab, pieces, "test data")
    assert seen.counts["Style"] == {"jig": 2, "reel": 1}  # pieces
    assert seen.counts["Density"] == {"mid": 7, "high": 2}  # bars
    assert seen.counts["TimeSig"] == {"6/8": 5, "4/4": 4}
    assert seen.counts["Poly"] == {"single": 9} and "chords" not in seen.counts["Poly"]
    assert seen.pitch == (62, 62)
    assert seen.style_meters == {"jig": {"6/8": 5}, "reel": {"4/4": 4}}
    assert seen.usual_meter("jig") == "6/8" and seen.usual_meter("polka") is None


def test_a_value_seen_a_handful_of_times_in_a_large_corpus_is_not_learned():
    seen = Seen({"Poly": {"single": 100_000, "dyads": 93, "chords": 5}}, source="x")
    assert seen.known("Poly") == ["single"]
    seen = Seen({"Key": {"D:major": 2000, "E:minor": 99, "G:minor": MIN_SEEN, "B:major": 1}}, source="x")
    assert seen.known("Key") == ["D:major", "E:minor", "G:minor"]
    small = Seen({"Poly": {"single": 8, "chords": 2}}, source="x")  # a user's ten bars: two are plenty
    assert small.known("Poly") == ["single", "chords"]


def test_round_trip_and_vocabulary_fallback(tok, tmp_path):
    seen = summarize(tok.vocab, [_piece(tok, "reel", "2/2", 2)], "test data")
    write_seen(tmp_path, seen)
    back = read_seen(tmp_path, "again")
    assert back.counts == seen.counts and back.style_meters == seen.style_meters and back.source == "again"
    assert json.loads((tmp_path / SEEN_FILE).read_text())["min_seen"] == MIN_SEEN
    assert read_seen(tmp_path / "nowhere") is None
    vocab = from_vocabulary(tok.vocab)
    assert vocab.from_vocabulary and "chords" in vocab.known("Poly") and "vocabulary" in vocab.source


def test_the_shipped_model_knows_its_corpus():
    """The shipped model carries its training data's counts: guitar music with chords, palm mutes and drop D beside
    the fiddle tunes; no 7-string (too few pieces) and no other technique."""
    loaded = load_run()
    seen = loaded.seen
    assert not seen.from_vocabulary and "shipped model" in seen.source
    assert seen.known("Tuning") == ["standard", "drop-d"] and "chords" in seen.known("Poly")
    assert seen.known("PM") == ["none", "most"] and seen.known("Tech") == ["none"] and "5/4" not in seen.known("TimeSig")
    assert seen.usual_meter("rock") == "4/4"
    assert seen.usual_meter("jig") == "6/8" and seen.usual_meter("slip-jig") == "9/8"


def test_an_older_run_counts_its_dataset_or_falls_back_to_its_vocabulary(tok, tmp_path):
    cfg = load_run().cfg
    cfg.data.dataset = str(tmp_path / "gone")
    seen = seen_of_run(tmp_path, cfg, tok)
    assert seen.from_vocabulary
