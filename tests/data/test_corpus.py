"""The built-in corpus keeps what each tune's ABC header knows: its type (the style) and its K: key."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from music21 import converter

from guitarformer.config import DataConfig
from guitarformer.data.corpus import (
    build_corpus,
    corpus_labels,
    ensure_builtin_dataset,
    labels_taken,
    label_summary,
    labels,
)
from guitarformer.data.dataset import TokenSplit
from guitarformer.data.prepare import load_meta
from guitarformer.vocab.tab_tokens import control_styles
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.data.tune_labels import (
    header_of,
    key_control,
    key_label,
    read_headers,
    section_types,
    tune_type,
)

BOOK = """%abc
X:1
T:The Boys of Ballisodare -- Reel
M:4/4
K:Ador
|:eA~A2 eAdB|
X:2
T:Haste to the Wedding
R:double jig
M:6/8
K:D
|:AFA Agf|
X:3
T:The Dawning of the Day
M:3/4
K:G mix
G2 A2 B2|
X:4
T:An Untyped Tune
K:Bb
B2 c2 d2|
"""


def test_tune_types_come_from_r_else_the_title_through_one_table():
    assert tune_type("double jig", "Haste to the Wedding") == "jig"
    assert tune_type("slipjig", None) == "slip-jig" and tune_type("Slip Jig", None) == "slip-jig"
    assert tune_type(None, "The Boys of Ballisodare -- Reel") == "reel"
    assert tune_type(None, "42d Highland Regiment Strathspey") == "strathspey"  # the type ends the title
    assert tune_type(None, "Planxty Toby Peyton") == "air" and tune_type("clog", None) == "hornpipe"
    assert tune_type("c:o'carolan", "The Fair Maid") is None  # "Fair" is no air; R: names no type
    assert tune_type(None, None) is None


def test_untyped_tunes_of_a_book_in_sections_take_the_type_around_them():
    numbered = [(1, None), (2, "air"), (3, None), (4, "air"), (5, None), (6, "jig"), (7, None), (7, "jig"),
                (8, None), (None, None), (9, "reel")]
    assert section_types(numbered) == [None, "air", "air", "air", None, "jig", "jig", "jig", None, None, "reel"]


def test_keys_keep_their_mode_and_map_to_major_or_minor_by_the_third():
    tunes = list(converter.parse(BOOK, format="abc").scores)
    assert [key_label(t) for t in tunes] == ["A:dorian", "D:major", "G:mixolydian", "A#:major"]
    assert [key_control(key_label(t)) for t in tunes] == ["A:minor", "D:major", "G:major", "A#:major"]
    assert key_control(None) is None and key_control("E:aeolian") == "E:minor"


def test_headers_are_matched_to_music21s_tunes_by_position_or_number():
    headers = read_headers(BOOK)
    assert [(h.number, h.rhythm) for h in headers] == [("1", None), ("2", "double jig"), ("3", None), ("4", None)]
    assert headers[0].title == "The Boys of Ballisodare -- Reel"
    assert header_of(headers, 1, "2", tunes=4) is headers[1]
    assert header_of(headers, 0, "3", tunes=2) is headers[2]  # music21 lost a tune: by X: number
    assert header_of(headers, 0, "9", tunes=2) is None


@pytest.fixture(scope="module")
def corpus(cache_root):
    return build_corpus(limit=8, progress=False)


def test_the_corpus_records_each_tunes_type_and_key_as_its_labels(corpus):
    records = [json.loads(x) for x in (corpus / "tunes.jsonl").read_text().splitlines()]
    ok = [r for r in records if r["status"] == "ok"]
    assert ok and all({"key_label", "key", "type", "type_from", "number"} <= set(r) for r in records)
    fiddle = [r for r in ok if r["type_from"] != "source"]
    assert all((r["type_from"] == "header") == bool(r["type"]) for r in fiddle)  # Ryan's: one typed tune a file
    assert {r["type"] for r in ok if r["type_from"] == "source"} == {"rock", "classical"}  # the guitar corpora
    assert all((corpus / "midi" / r["file"]).is_file() for r in ok)
    given = json.loads((corpus / "labels.json").read_text())
    assert given == labels(records) and set(given) == {r["file"] for r in ok}
    assert all(given[r["file"]].get("Style") == r["type"] for r in ok)
    assert all(given[r["file"]].get("Key") == key_control(r["key_label"]) for r in ok)
    assert any(r["type"] for r in ok) and any(r["key"] for r in ok)
    summary = json.loads((corpus / "corpus.json").read_text())["labels"]
    assert summary == label_summary(records) and sum(summary["styles"].values()) == len(ok)
    assert set(corpus_labels(corpus)) == {str((corpus / "midi" / f).resolve()) for f in given}


@pytest.fixture(scope="module")
def controls_dataset(corpus):
    if not labels_taken():
        pytest.skip("this prepare takes no given control values: no styles, keys estimated from the notes")
    return ensure_builtin_dataset(DataConfig(controls=True, corpus_limit=8), progress=False)


def test_the_builtin_dataset_with_controls_has_the_tune_types_as_styles(corpus, controls_dataset):
    records = [json.loads(x) for x in (corpus / "tunes.jsonl").read_text().splitlines()]
    types = sorted({r["type"] for r in records if r["status"] == "ok" and r["type"]})
    assert types and load_meta(controls_dataset)["control_styles"] == types
    assert control_styles(load_tokenizer(controls_dataset / "tokenizer.json")) == types


def test_the_builtin_dataset_with_controls_learns_the_written_keys(corpus, controls_dataset):
    tok = load_tokenizer(controls_dataset / "tokenizer.json")
    given = corpus_labels(corpus)
    lines = [json.loads(x) for x in (controls_dataset / "manifest.jsonl").read_text().splitlines()]
    split = TokenSplit(controls_dataset, "train")
    tokens = [tok[int(i)] for k in range(split.num_sequences) for i in split.sequence(k)]
    keys = Counter(t.split("_", 1)[1] for t in tokens if t.startswith("CtrlKey_"))
    written = Counter(given[str(Path(d["path"]).resolve())].get("Key") for d in lines if d["split"] == "train")
    estimated = written.pop(None, 0)  # the guitar corpora write no key: prepare estimates theirs from the notes
    assert sum(keys.values()) == sum(written.values()) + estimated
    assert all(keys[k] >= n for k, n in written.items()) and any(k.endswith(":minor") for k in keys)
    styles = Counter(t.split("_", 1)[1] for t in tokens if t.startswith("CtrlStyle_"))
    assert styles == Counter(given[str(Path(d["path"]).resolve())]["Style"] for d in lines if d["split"] == "train")


def test_nats_per_note_by_style_covers_every_styled_val_piece(controls_dataset):
    """The per-style val numbers a run prints at its end: every style of the val pieces, each over its notes."""
    import math

    import numpy as np

    from guitarformer.config import ModelConfig
    from guitarformer.data.dataset import note_ids
    from guitarformer.models import build_model
    from guitarformer.training.styles import nats_per_note_by_style

    tok = load_tokenizer(controls_dataset / "tokenizer.json")
    split = TokenSplit(controls_dataset, "val")
    if split.num_sequences == 0:
        pytest.skip("the tiny corpus drew no val piece")
    model = build_model(ModelConfig(prev_token=False, copy=False,
                                    vocab_size=len(tok), block_size=64, n_layer=1, n_head=2, n_embd=16))
    got = nats_per_note_by_style(model, tok, split, 64, "cpu")
    styles = {tok[int(i)].split("_", 1)[1] for k in range(split.num_sequences)
              for i in split.sequence(k)[:8] if tok[int(i)].startswith("CtrlStyle_")}
    assert set(got) - {"(none)"} == styles
    notes = sum(int(np.isin(split.sequence(k)[1:], note_ids(tok)).sum()) for k in range(split.num_sequences))
    assert sum(n for _, n in got.values()) == notes
    assert all(math.isfinite(v) and v > 0 for v, _ in got.values())
