"""A fine-tune's tokens: an init run's tokenizer extended by new styles keeps every id, survives tokenizer.json,
and `tokens_differ` names what makes another dataset's tokens unusable."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from guitarformer.config import DataConfig
from guitarformer.data.prepare import prepare
from guitarformer.vocab.tab_tokens import control_styles
from guitarformer.vocab.tokenization import build_tokenizer, extended_tokenizer, load_tokenizer, tokens_differ
from guitarformer.errors import GuitarformerError

STYLES = ["jig", "reel", "waltz"]


@pytest.fixture(scope="module")
def base():
    return build_tokenizer(DataConfig(controls=True, infill=0.3), STYLES)


def test_new_styles_go_after_the_whole_vocabulary(base, tmp_path):
    ext = extended_tokenizer(base, ["Surf Rock", "jig", "metal"])  # jig is known: not added again
    V = len(base)
    assert len(ext) == V + 2
    assert all(ext.vocab[t] == i for t, i in base.vocab.items())
    assert ext.vocab["CtrlStyle_metal"] == V and ext.vocab["CtrlStyle_surf-rock"] == V + 1  # sorted, cleaned
    assert control_styles(ext) == [*STYLES, "metal", "surf-rock"]
    assert tokens_differ(base, ext) is None
    ext.save(tmp_path / "tokenizer.json")
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert again.vocab == ext.vocab
    # A fine-tune of the fine-tune adds after those: ids of both earlier vocabularies stay.
    more = extended_tokenizer(again, ["blues"])
    assert more.vocab["CtrlStyle_blues"] == V + 2 and tokens_differ(ext, more) is None
    assert extended_tokenizer(base, STYLES) is base  # nothing new: the same tokenizer


def test_a_tokenizer_built_with_the_styles_is_numbered_otherwise(base):
    scratch = build_tokenizer(DataConfig(controls=True, infill=0.3), [*STYLES, "metal"])
    why = tokens_differ(base, scratch)
    assert why is not None and why.startswith("styles") and "other ids" in why


@pytest.mark.parametrize("change, words", [
    (dict(tokenizer="REMI"), "tokenizer REMI, the init run's TabREMI"),
    (dict(use_tempos=False), "tempo tokens False, the init run's True"),
    (dict(use_time_signatures=False), "time signatures False"),
    (dict(controls=False), "control tokens off, the init run's on"),
    (dict(infill=0.0, controls=True), None),  # the fill tokens are always in TabREMI's vocabulary
])
def test_other_settings_are_named(base, change, words):
    cfg = DataConfig(**{"controls": True, "infill": 0.3, **change})
    why = tokens_differ(base, build_tokenizer(cfg, STYLES))
    assert why == words if words is None else words in why


def test_beat_resolution_is_named(base):
    other = build_tokenizer(DataConfig(controls=True), STYLES)
    other.config.beat_res = {(0, 4): 4, (4, 12): 2}
    assert "beat resolution" in tokens_differ(base, other)


def test_a_tokenizer_without_controls_is_not_extended():
    plain = build_tokenizer(DataConfig(), [])
    assert extended_tokenizer(plain, ["metal"]) is plain


def test_preparing_like_a_bpe_run_is_refused(tmp_path):
    """BPE merges are learned from the init run's own data: `prepare --like` such a run says so before reading."""
    with pytest.raises(GuitarformerError, match="BPE-merged") as e:
        prepare([tmp_path], tmp_path / "ds", like=SimpleNamespace(is_trained=True))
    assert "base tokens" in e.value.fix and not (tmp_path / "ds").exists()
