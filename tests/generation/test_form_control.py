"""The form control (compose/form.py, generation/constraint/repeats.py, `sample --form`): a bar the plan repeats comes out
as the earlier bar's notes, letters and forms parse, tunes' forms are counted and travel in a file."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from click.testing import CliRunner

from guitarformer.app import SampleRequest, load_run, sample
from guitarformer.app.sample import default_form
from guitarformer.cli import main
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.evaluation.form import bar_notes
from guitarformer.compose.conditioning import conditions
from guitarformer.compose.form import (
    FORMS_FILE,
    FormCounts,
    agree,
    check_form,
    count_forms,
    form_of,
    parse_letters,
    parse_plan,
    phrase_repeats,
    plan_string,
    read_forms,
    write_forms,
)
from guitarformer.pretrained import pretrained_dir

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def shipped():
    return load_run(None, None, "cpu")


def _repeats_as_planned(riff, plan) -> None:
    bars = bar_notes(riff.gs.score, len(plan))
    assert len(bars) == len(plan)
    for j, i in enumerate(plan):
        if i is not None and bars[i]:  # a bar without notes repeats nothing: the model writes that bar
            assert bars[j] == bars[i], f"bar {j + 1} should repeat bar {i + 1}"


def test_letters_are_phrases_and_a_letter_seen_before_repeats_its_phrase():
    assert parse_letters("AABB", 8) == [None, None, 0, 1, None, None, 4, 5]
    assert parse_letters("abac", 4) == [None, None, 0, None]
    assert parse_letters("AB", None) == [None] * 16  # without --bars a form spans 16 bars
    assert check_form("aaba", 8) == "AABA" and check_form(" None ", 8) == "none" and check_form(None, None) == "auto"


@pytest.mark.parametrize("value, bars, says", [("AB1", 8, "--form AABB"), ("A B", 8, "--form AABB"),
                                               ("ABC", 8, "--bars 9"), ("AABBA", 4, "a multiple of 5"),
                                               ("", 8, "--form AABB")])
def test_bad_forms_are_refused_with_the_fix(value, bars, says):
    with pytest.raises(GuitarformerError) as e:
        check_form(value, bars)
    assert says in str(e.value) and "--form" in e.value.problem


def test_a_bad_form_fails_before_the_model_loads(tmp_path):
    res = CliRunner().invoke(main, ["sample", "--out", str(tmp_path / "r.mid"), "--run", str(tmp_path / "nothing"),
                                    "--form", "AB-A", "--bars", "4"])
    assert res.exit_code != 0 and "--form 'AB-A' is not a form" in res.output


def test_forms_of_tunes_count_exact_bar_repeats_and_round_trip(tmp_path):
    tok = load_tokenizer(pretrained_dir() / "tokenizer.json")
    bar_a = ["Bar_None", "TimeSig_4/4", "Position_0", "Pitch_52", "Duration_1.0.8", "String_4"]
    bar_b = ["Bar_None", "TimeSig_4/4", "Position_0", "Pitch_55", "Duration_1.0.8", "String_3"]
    other_string = bar_a[:-1] + ["String_5"]  # the same notes on another string: still a repeat
    empty = ["Bar_None", "TimeSig_4/4"]
    piece = ["BOS_None", "CtrlStyle_jig", *bar_a, *bar_b, *other_string, *empty, *empty, *bar_b, "EOS_None"]
    plain = ["BOS_None", *bar_a, *bar_b]
    forms = count_forms(tok.vocab, [[tok[t] for t in piece], [tok[t] for t in plain]], "test")
    assert forms.by_style == {"jig": {"--0--1": 1}, "": {"--": 1}}
    assert form_of(["x", "y", "x", None, None, "y"]) == [None, None, 0, None, None, 1]
    assert parse_plan(plan_string([None, 0, None, 2])) == [None, 0, None, 2]
    write_forms(tmp_path, forms)
    back = read_forms(tmp_path)
    assert back.by_style == forms.by_style and back.bars == 16
    assert read_forms(tmp_path / "nowhere") is None


def test_auto_draws_from_the_asked_style_seeded():
    forms = FormCounts({"jig": {"--01": 3}, "reel": {"----": 2, "-01-": 1}})
    assert all(forms.draw(random.Random(s), "jig", 4) == [None, None, 0, 1] for s in range(20))
    drawn = {plan_string(forms.draw(random.Random(s), "reel", 4)) for s in range(40)}
    assert drawn == {"----", "-01-"}
    pooled = {plan_string(forms.draw(random.Random(s), None, 4)) for s in range(60)}
    assert pooled == {"--01", "----", "-01-"}
    assert forms.draw(random.Random(5), None, 2) == forms.draw(random.Random(5), None, 2)
    assert len(forms.draw(random.Random(1), "jig", 3)) == 3


def test_a_drawn_form_keeps_a_tunes_phrase_repeats_only():
    """Two or more bars in a row repeating bars in a row stay; a bar repeated alone is left to the model."""
    assert plan_string(phrase_repeats(parse_plan("-----1--01234167"))) == "--------01234-67"
    assert plan_string(phrase_repeats(parse_plan("-0-0"))) == "----"
    assert plan_string(phrase_repeats(parse_plan("-01-"))) == "-01-"
    assert plan_string(phrase_repeats(parse_plan("--0123--"))) == "--0123--"
    forms = FormCounts({"reel": {"-0-012": 1}})
    assert plan_string(forms.draw(random.Random(0), "reel", 6)) == "---012"
    assert plan_string(forms.draw(random.Random(0), "reel", 4)) == "----"  # cut first: "-0-0", single repeats


def test_the_shipped_model_carries_its_tunes_forms_small(shipped):
    path = pretrained_dir() / FORMS_FILE
    assert path.stat().st_size < 100_000
    assert shipped.forms is not None and {"jig", "reel", "hornpipe"} <= set(shipped.forms.by_style)
    plans = [parse_plan(f) for forms in shipped.forms.by_style.values() for f in forms]
    assert any(any(i is not None for i in p) for p in plans)


@pytest.mark.slow
@pytest.mark.parametrize("asked", [{}, {"tempo": 130}, {"time_signature": "6/8", "tempo": 100, "key": "D:major"},
                                   {"style": "reel", "density": "high"}])
def test_a_forced_repeat_repeats_the_notes(shipped, asked):
    """Through the first bar's controls and meter (asked or the model's), a tempo opening it, the time signature
    every bar states."""
    res = sample(SampleRequest.of(num_samples=3, bars=8, seed=11, form="ABAC", **asked), shipped)
    for riff in res.riffs:
        _repeats_as_planned(riff, parse_letters("ABAC", 8))


@pytest.mark.slow
def test_auto_forms_repeat_as_drawn(shipped):
    req = SampleRequest.of(num_samples=4, bars=8, seed=3, style="jig", form="auto")
    res = sample(req, shipped)
    for k, riff in enumerate(res.riffs):
        plan = shipped.forms.draw(random.Random(__import__("guitarformer.compose.riffs", fromlist=["x"])
                                                .riff_seed(3, k)), "jig", 8)
        assert len(plan) == 8 and plan in [phrase_repeats(parse_plan(f[:8])) for f in shipped.forms.by_style["jig"]]
        _repeats_as_planned(riff, plan)


@pytest.mark.slow
def test_the_default_form_is_the_runs_measured_one_else_the_models_own_where_it_copies(shipped):
    """With `form` unset, `sample` takes the run's sample.form, which the release sets by measurement (the shipped
    model: `auto`, its riffs alone repeating 30.5% of their first 16 bars and with a tune's form 50.8% against the
    test tunes' 42.2%, MODEL_CARD.md). A run without one takes its own form where the model copies (model.copy), a
    tune's else."""
    from dataclasses import replace

    assert shipped.cfg.model.copy and shipped.cfg.sample.form == "auto"
    req = dict(num_samples=2, bars=8, seed=7, style="jig")  # forms ----0123 and ----012-: repeats to force
    auto, alone = sample(SampleRequest.of(**req, form="auto"), shipped), sample(SampleRequest.of(**req, form="none"), shipped)
    assert [r.ids for r in auto.riffs] != [r.ids for r in alone.riffs]
    measured = replace(shipped, cfg=replace(shipped.cfg, sample=replace(shipped.cfg.sample, form="auto")))
    assert [r.ids for r in sample(SampleRequest.of(**req), measured).riffs] == [r.ids for r in auto.riffs]
    unset = replace(shipped, cfg=replace(shipped.cfg, sample=replace(shipped.cfg.sample, form=None)))
    assert [r.ids for r in sample(SampleRequest.of(**req), unset).riffs] == [r.ids for r in alone.riffs]
    plain = replace(unset, cfg=replace(unset.cfg, model=replace(unset.cfg.model, copy=False)))
    assert default_form(plain) == "auto" and default_form(unset) == "none"


@pytest.mark.slow
def test_form_none_is_the_model_alone_as_before(shipped):
    """`--form none` leaves the riffs to the model: pinned riffs of the shipped model, seed 7 (its default meters,
    drawn, and its own). The form control's first version wrote, with `none`, exactly the riffs recorded before it
    existed; the pins are recorded again when the shipped model (last: the guitar corpus's release), a
    guard, the default guidance or the meters' draw changes."""
    want = {"": "5013809a96d9bc40", "controls": "303348e74b562d4f", "unguided": "06943a3423f3744b", "own meter": "531dd3298dbee5bb"}
    controls = {"key": "E:minor", "density": "1-2:low,3-6:high", "tempo": 130}
    for name, kw in (("", {}), ("controls", controls), ("unguided", {**controls, "guidance": 0.0}),
                     ("own meter", {"time_signature": "none"})):
        res = sample(SampleRequest.of(num_samples=3, bars=6, seed=7, form="none", **kw), shipped)
        ids = [r.ids for r in res.riffs]
        assert hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16] == want[name]


def test_a_bar_repeats_only_a_bar_asked_the_same_controls(shipped):
    asked = conditions(shipped.tokenizer, None, None, None, seen=shipped.seen, density="1-4:low,5-8:high")
    plan = parse_letters("AAAA", 8)  # bars 3-4, 5-6 and 7-8 repeat bars 1-2
    assert agree(plan, asked) == [None, None, 0, 1, None, None, None, None]
    assert agree(plan, None) == plan
    res = sample(SampleRequest.of(num_samples=2, bars=8, seed=4, form="AAAA", density="1-4:low,5-8:high"), shipped)
    for riff in res.riffs:
        _repeats_as_planned(riff, agree(plan, asked))


def test_a_run_without_forms_falls_back_to_none_and_says_so(shipped, tmp_path):
    from dataclasses import replace

    old = replace(shipped, forms=None)
    res = sample(SampleRequest.of(num_samples=1, bars=4, seed=7, form="auto"), old)
    alone = sample(SampleRequest.of(num_samples=1, bars=4, seed=7, form="none"), shipped)
    assert res.riffs[0].ids == alone.riffs[0].ids
    assert any("--form auto" in w for w in res.warnings)
    default = sample(SampleRequest.of(num_samples=1, bars=4, seed=7), old)  # not asked: no warning
    assert default.riffs[0].ids == alone.riffs[0].ids and not default.warnings
