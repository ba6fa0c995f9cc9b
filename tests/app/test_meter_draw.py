"""`sample --time-signature auto` (app/sample.py `_meters`): each riff's meter drawn from the run's training bars,
riff k the riff its meter asked by name would be, the run's sample.time_signature as the default."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from click.testing import CliRunner

from guitarformer.app import SampleRequest, load_run, sample
from guitarformer.app.sample import check_sample_request
from guitarformer.cli import main
from guitarformer.vocab.seen import Seen
from guitarformer.errors import GuitarformerError
from guitarformer.compose.riffs import meters_to_draw, riff_indices, riff_meters

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def shipped():
    return load_run(None, None, "cpu")


def _meter(riff) -> str:
    ts = riff.gs.score.time_signatures[0]
    return f"{ts.numerator}/{ts.denominator}"


def test_the_meters_drawn_are_the_tunes_own_as_long_as_they_are_heard():
    seen = Seen({"TimeSig": {"6/8": 500, "2/4": 500, "2/2": 250, "1/4": 20, "5/8": 4}},
                style_meters={"jig": {"6/8": 90, "9/8": 10}, "reel": {"2/2": 60, "2/4": 40}})
    # Quarter notes: 1,500 in 6/8, 1,000 in 2/4 and in 2/2 (half the bars, twice as long); 1/4 and 5/8 under 1%.
    assert meters_to_draw(seen) == {"2/2": 1000.0, "2/4": 1000.0, "6/8": 1500.0}
    assert meters_to_draw(seen, "reel") == {"2/2": 240.0, "2/4": 80.0}
    assert meters_to_draw(seen, "waltz") == meters_to_draw(seen)  # a style without bars: every bar's meters
    drawn = Counter(riff_meters(meters_to_draw(seen), 0, 3000))
    assert set(drawn) == {"2/2", "2/4", "6/8"}
    assert 0.40 < drawn["6/8"] / 3000 < 0.46 and 0.26 < drawn["2/4"] / 3000 < 0.31
    # Riff k's meter is its own: the same whatever the riffs asked before it, another seed another draw.
    assert riff_meters(meters_to_draw(seen), 5, 4, first=10) == riff_meters(meters_to_draw(seen), 5, 14)[10:]
    assert riff_meters(meters_to_draw(seen), 5, 40) != riff_meters(meters_to_draw(seen), 6, 40)


def test_riff_indices_are_a_range_or_the_list_given():
    assert riff_indices(3, 2) == [3, 4] and riff_indices([5, 1], 2) == [5, 1]
    with pytest.raises(ValueError):
        riff_indices([1, 2], 3)


def test_a_drawn_meter_gives_the_riff_that_meter_asks_for(shipped):
    """Riff k under auto opens in its drawn meter and is, token for token, riff k asked in that meter by name: the
    riffs of each meter go in a batch of their own and keep their indices, so their seeds."""
    req = dict(num_samples=4, bars=2, seed=3)
    auto = sample(SampleRequest.of(**req, time_signature="auto"), shipped)
    meters = riff_meters(meters_to_draw(shipped.seen), 3, 4)
    assert len(set(meters)) > 1  # the test would not tell a batch per meter from one batch otherwise
    for k, riff in enumerate(auto.riffs):
        assert _meter(riff) == meters[k]
        named = sample(SampleRequest.of(**req, time_signature=meters[k]), shipped)
        assert riff.ids == named.riffs[k].ids
    assert [r.ids for r in auto.riffs] == [r.ids for r in sample(SampleRequest.of(**req, time_signature="auto",
                                                                              batch_size=1), shipped).riffs]


def test_a_style_draws_among_its_own_meters(shipped):
    res = sample(SampleRequest.of(num_samples=6, bars=1, seed=1, style="hornpipe", time_signature="auto"), shipped)
    hornpipe = meters_to_draw(shipped.seen, "hornpipe")
    assert set(hornpipe) == {"2/2", "2/4", "4/4"}
    assert [_meter(r) for r in res.riffs] == riff_meters(hornpipe, 1, 6)


def test_the_runs_sample_time_signature_is_the_default(shipped):
    cfg = shipped.cfg
    auto = replace(shipped, cfg=replace(cfg, sample=replace(cfg.sample, time_signature="auto")))
    unset = replace(shipped, cfg=replace(cfg, sample=replace(cfg.sample, time_signature=None)))
    req = dict(num_samples=3, bars=2, seed=5)
    asked = sample(SampleRequest.of(**req, time_signature="auto"), unset)
    assert [r.ids for r in sample(SampleRequest.of(**req), auto).riffs] == [r.ids for r in asked.riffs]
    own = sample(SampleRequest.of(**req), unset)
    assert [r.ids for r in own.riffs] != [r.ids for r in asked.riffs]
    named = sample(SampleRequest.of(**req, time_signature="3/4"), auto)  # a meter asked by name wins
    assert {_meter(r) for r in named.riffs} == {"3/4"}
    mine = sample(SampleRequest.of(**req, time_signature="none"), auto)  # and "none", the model's own
    assert [r.ids for r in mine.riffs] == [r.ids for r in own.riffs]
    # A style asked keeps the guard's usual meter under the run's default; asked by name, auto draws its meters.
    hornpipes = sample(SampleRequest.of(**req, style="hornpipe"), auto)
    assert {_meter(r) for r in hornpipes.riffs} == {shipped.seen.usual_meter("hornpipe")}
    assert [r.ids for r in hornpipes.riffs] == [r.ids for r in sample(SampleRequest.of(**req, style="hornpipe"),
                                                                      unset).riffs]


def test_auto_without_meter_counts_says_so_and_a_prompt_keeps_its_meter(shipped, tmp_path):
    bare = replace(shipped, seen=None)
    res = sample(SampleRequest.of(num_samples=1, bars=1, seed=2, time_signature="auto"), bare)
    assert any("--time-signature auto" in w for w in res.warnings)
    own = sample(SampleRequest.of(num_samples=1, bars=1, seed=2, time_signature="none"), bare)
    assert res.riffs[0].ids == own.riffs[0].ids and not own.warnings
    with pytest.raises(GuitarformerError, match="time-signature"):
        check_sample_request(SampleRequest.of(prompt=tmp_path / "song.mid", time_signature="auto"))
    check_sample_request(SampleRequest.of(prompt=tmp_path / "song.mid", time_signature="none"))  # what a prompt does


def test_the_command_takes_auto(tmp_path):
    out = tmp_path / "r.mid"
    res = CliRunner().invoke(main, ["sample", "--time-signature", "auto", "--bars", "1", "--seed", "4",
                                    "--num-samples", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r_000.mid").is_file() and (tmp_path / "r_001.mid").is_file()
