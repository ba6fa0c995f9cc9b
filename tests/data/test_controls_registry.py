"""The control registry (vocab/controls.py): adding a control is one class. A toy bar control, registered for the test,
is a `sample` option, a request field, a studio form field, a `run_info` option and a token the sampler writes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from guitarformer.app import SampleRequest, load_run, run_info, sample
from guitarformer.cli import main
from guitarformer.vocab.controls import (
    BAR,
    PIECE,
    BarFacts,
    Control,
    Controls,
    PlayedNote,
    bar_controls,
    control_names,
    control_vocabulary,
    option_controls,
    register,
    unregister,
)
from guitarformer.errors import GuitarformerError
from guitarformer.compose.conditioning import conditions
from guitarformer.studio.forms import form_fields, sample_form
from helpers.studio_runs import studio_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Toy(Control):
    """Whether a bar's first note is on the lowest string: "low" or "high"."""

    name, scope, values, option, label = "Toy", BAR, ("low", "high"), "toy_string", "Toy string"
    help = "Run with controls: whether each bar opens on the lowest string (low, high)."

    def measure(self, facts: BarFacts) -> str:
        return "low" if min(facts.notes, key=lambda n: n.onset).string == 0 else "high"


@pytest.fixture
def toy():
    register(Toy)
    try:
        yield
    finally:
        unregister("Toy")


def test_the_built_in_controls_keep_their_token_order():
    assert control_names(PIECE) == ("Tuning", "Capo", "Key", "Style")
    assert control_names(BAR) == ("Density", "Poly", "Pos", "PM", "Tech")
    assert list(option_controls()) == ["key", "style", "density", "polyphony", "hand_position", "palm_mute",
                                       "techniques"]


def test_style_values_come_from_the_data_not_a_list():
    vocab = control_vocabulary(["Rock", "classical"])
    assert {"CtrlStyle_rock", "CtrlStyle_classical"} <= set(vocab)
    assert not any(t.startswith("CtrlStyle_") for t in control_vocabulary([]))


def test_a_registered_control_is_measured_and_tokenized(toy):
    notes = [PlayedNote(0, 240, 40, string=0, fret=0), PlayedNote(240, 240, 45, string=1, fret=0)]
    assert bar_controls(notes, 480, 1920)["Toy"] == "low"
    assert control_vocabulary([])[-2:] == ["CtrlToy_low", "CtrlToy_high"]
    with pytest.raises(ValueError):
        register(Toy)  # a name is registered once


def test_a_registered_control_is_in_the_cli_the_request_the_form_and_run_info(toy, tmp_path):
    help_text = " ".join(CliRunner().invoke(main, ["sample", "--help"]).output.split())
    assert "--toy-string" in help_text and "opens on the lowest string" in help_text

    req = SampleRequest.of(bars=1, toy_string="high", temperature=0.5)
    assert req.controls.toy_string == "high" and req.sampling.temperature == 0.5
    with pytest.raises(GuitarformerError, match="unknown control option 'nope'"):
        Controls(nope="x")

    assert {"name": "toy_string", "label": "Toy string", "input": "text", "help": Toy.help} in form_fields()

    loaded = load_run(studio_run(tmp_path / "run"))  # its tokenizer built with Toy registered
    info = run_info(loaded)
    assert info.options["toy_string"].available and info.options["toy_string"].values == ["high", "low"]
    assert sample_form({"toy_string": "high", "bars": 2}, info).options == {"toy_string": "high", "bars": 2}

    # Asked per bar, the sampler writes the toy's token after each Bar, as every bar control's (none past bar 2).
    tok = loaded.tokenizer
    asked = conditions(tok, guard=False, toy_string="1:low,2:high")
    assert [[tok[i] for i in ids] for ids in asked.bar_controls()] == [["CtrlToy_low"], ["CtrlToy_high"], []]
    out = tmp_path / "r.mid"
    res = CliRunner().invoke(main, ["sample", "--run", str(tmp_path / "run"), "--bars", "2", "--toy-string",
                                    "1:low,2:high", "--no-guard", "--seed", "3", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.exists()
    riff = sample(SampleRequest.of(bars=2, seed=3, guard=False, toy_string="1:low,2:high"), loaded).riffs[0]
    written = [tok[i] for i in riff.ids if tok[i].startswith("CtrlToy_")]
    assert written[:2] == ["CtrlToy_low", "CtrlToy_high"]


def test_a_control_the_run_never_learned_is_refused_by_its_option(toy, tmp_path):
    unregister("Toy")  # the run's tokenizer is built without it ...
    loaded = load_run(studio_run(tmp_path / "run"))
    register(Toy)  # ... and it is asked for after
    with pytest.raises(GuitarformerError, match="--toy-string"):
        conditions(loaded.tokenizer, guard=False, toy_string="low")
