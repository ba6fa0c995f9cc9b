"""Control tokens end to end (issue #18): a dataset prepared with controls (styles from folder names), a few
training steps, then `sample --key ... --density ...`: the riffs carry the requested piece controls after BOS
and the bar controls after every Bar, the grammar holds (tokens_errors 0), and values the run never learned, or
control options for a run without controls, are refused with what to do instead."""

from __future__ import annotations

import shutil
from pathlib import Path

import miditok
import pytest
import torch
from click.testing import CliRunner
from helpers.tiny_runs import untrained_run

from guitarformer.runs.run import load_run
from guitarformer.cli import main
from guitarformer.config import DataConfig
from guitarformer.vocab.controls import controls_per_bar, notes_of
from guitarformer.data.dataset import TokenSplit
from guitarformer.vocab.seen import Seen
from guitarformer.vocab.tab_tokens import control_styles
from guitarformer.vocab.tokenization import build_tokenizer
from guitarformer.evaluation.likelihood import plain_tokens
from guitarformer.evaluation.report import EvalOptions, evaluate_run
from guitarformer.compose.conditioning import conditions
from guitarformer.generation.constraint.guitar import Asked, GuitarConstraint
from guitarformer.generation.decode.engine import generate
from guitarformer.models.kinds import Prompt
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.compose.riffs import Draws, RiffSpec, generate_riffs
from guitarformer.runs import load_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]  # trains a run end to end


@pytest.fixture(scope="module")
def control_run(tmp_path_factory) -> Path:
    """A tiny run trained a few steps on fixture tabs prepared with controls: metal/ and folk/ give the styles."""
    root = tmp_path_factory.mktemp("ctl")
    src = root / "tabs"
    (src / "metal").mkdir(parents=True)
    (src / "folk").mkdir()
    shutil.copy(FIXTURES / "tabs" / "riff.txt", src / "metal")
    shutil.copy(FIXTURES / "tabs" / "drop_d.txt", src / "folk")
    shutil.copy(FIXTURES / "io" / "drop_d_capo.gp5", src)  # directly in the input folder: no style
    r = CliRunner().invoke(main, ["prepare", str(src), "--out", str(root / "ds"), "--config", "tiny",
                                  "--set", "data.controls=true", "--workers", "1"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["train", "--config", "tiny", "--data", str(root / "ds"), "--run-dir",
                                  str(root / "run"), "--set", "train.max_steps=4", "--set", "train.eval_interval=4"])
    assert r.exit_code == 0, r.output
    return root / "run"


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory) -> Path:
    """An untrained REMI run without controls."""
    return untrained_run(tmp_path_factory.mktemp("plain"), build_tokenizer(DataConfig(tokenizer="REMI")), 64)


def test_run_records_the_styles_of_its_folders(control_run):
    loaded = load_run(control_run)
    _, tok, _ = loaded.model, loaded.tokenizer, loaded.cfg
    assert control_styles(tok) == ["folk", "metal"]


def test_riffs_carry_the_requested_controls(control_run):
    loaded = load_run(control_run)
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    asked = conditions(tok, tuning=(40, 45, 50, 55, 59, 64), tempo=140, time_signature="7/8", hand_position=7,
                       key="E:minor", density="high", polyphony="chords", palm_mute="high", style="metal")
    piece = [tok[i] for i in asked.piece]
    bar = [tok[i] for i in asked.bar]
    assert piece == ["CtrlTuning_standard", "CtrlKey_E:minor", "CtrlStyle_metal"]
    assert bar == ["CtrlDensity_high", "CtrlPoly_chords", "CtrlPos_5-9", "CtrlPM_most"]
    params = SamplingParams(300, top_p=0.95, max_bars=3)
    riffs = generate_riffs(model, tok, cfg, params, Draws(8, 3), RiffSpec(asked=asked))
    bars_seen = 0
    for r in riffs:
        toks = [tok[i] for i in r.ids]
        assert toks[:1 + len(piece)] == ["BOS_None", *piece]
        assert toks[len(piece) + 1 + 1 + len(bar)] == "TimeSig_7/8"
        for j, t in enumerate(toks):
            if t == "Bar_None":
                bars_seen += 1
                assert toks[j + 1:j + 1 + len(bar)] == bar, toks[j:j + 8]
        body = [i for i in r.ids if tok[i] not in ("BOS_None", "EOS_None")]
        assert tok.tokens_errors(miditok.TokSequence(ids=body)) == 0
    assert bars_seen > len(riffs)  # the model opened bars of its own, and each got the controls


def test_time_signature_may_follow_bar_controls(control_run):
    """A bar the model opens itself may change meter after its controls (the grammar allows TimeSig there)."""
    loaded = load_run(control_run)
    _, tok, _ = loaded.model, loaded.tokenizer, loaded.cfg
    c = GuitarConstraint(tok)
    c.start(torch.tensor([[tok["BOS_None"], tok["Bar_None"], tok["CtrlDensity_low"]]]))
    m = c.mask(torch.tensor([tok["CtrlDensity_low"]]))
    assert m[0, tok["TimeSig_3/4"]]
    forced = GuitarConstraint(tok, asked=Asked(bar_controls=[tok["CtrlDensity_low"], tok["CtrlPM_none"]]))
    forced.start(torch.tensor([[tok["BOS_None"], tok["Bar_None"]]]))
    m = forced.mask(torch.tensor([tok["Bar_None"]]))
    assert m[0].nonzero().flatten().tolist() == [tok["CtrlDensity_low"]]
    m = forced.mask(torch.tensor([tok["CtrlDensity_low"]]))
    assert m[0].nonzero().flatten().tolist() == [tok["CtrlPM_none"]]


def test_sliding_window_keeps_the_piece_controls(control_run):
    loaded = load_run(control_run)
    model, tok, _ = loaded.model, loaded.tokenizer, loaded.cfg
    front = [tok["BOS_None"], tok["CtrlKey_E:minor"], tok["CtrlStyle_metal"]]
    seen: list[list[int]] = []
    hook = model.register_forward_pre_hook(lambda mod, args: seen.append(args[0][0, :3].tolist())
                                           if args[0].shape[1] > 1 else None)
    try:
        ctx = model.config.block_size
        prompt = Prompt(torch.tensor([front + [tok["Bar_None"]]]), keep_front=len(front))
        generate(model, prompt, SamplingParams(2 * ctx),
                 generator=torch.Generator().manual_seed(0))
    finally:
        hook.remove()
    assert len(seen) >= 2  # the first pass and at least one slide
    assert all(s == front for s in seen)


def test_cli_sample_with_controls(control_run, tmp_path):
    """Every control option at a value the run's training data held (its dataset's controls_seen.json)."""
    seen = load_run(control_run).seen
    assert seen.source.startswith("the training data")
    known = {o: seen.known(c)[0] for o, c in (("--key", "Key"), ("--density", "Density"), ("--polyphony", "Poly"),
                                               ("--palm-mute", "PM"), ("--style", "Style"),
                                               ("--time-signature", "TimeSig"))}
    r = CliRunner().invoke(main, ["sample", "--run", str(control_run), "--out", str(tmp_path / "r.mid"),
                                  *[x for kv in known.items() for x in kv], "--hand-position", "7",
                                  "--tempo", f"{seen.tempo[0]:g}", "--bars", "2", "--seed", "1", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r.mid").is_file()


@pytest.mark.parametrize("option,value,why", [("--polyphony", "dyads", "never learned"),
                                              ("--palm-mute", "most", "never learned"),
                                              ("--time-signature", "7/8", "never learned"),
                                              ("--tuning", "drop-c", "never played in drop-c"),
                                              ("--tempo", "399", "tempos")])
def test_values_the_training_data_never_held_are_refused(control_run, tmp_path, option, value, why):
    """The vocabulary has every control value; the run's data had none of these, so `sample` says no."""
    r = CliRunner().invoke(main, ["sample", "--run", str(control_run), "--out", str(tmp_path / "r.mid"),
                                  option, value, "--bars", "1", "--device", "cpu"])
    assert r.exit_code == 2, r.output
    assert option in r.output and why in r.output and not (tmp_path / "r.mid").exists()
    if why == "never learned":  # the fix names the fine-tune that works: data tokenized like the init run
        assert "prepare my-tabs --like pretrained" in r.output and "--init pretrained" in r.output


def test_bar_controls_per_bar(control_run):
    """--density 1-2:low,3-4:high: each bar's own controls follow its Bar, bar 3 never bar 1's; bars past the
    schedule get none asked."""
    loaded = load_run(control_run)
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    asked = conditions(tok, density="1-2:low,3-4:high", polyphony="single", guard=False)
    assert [[tok[i] for i in b] for b in asked.schedule] == [
        ["CtrlDensity_low", "CtrlPoly_single"], ["CtrlDensity_low", "CtrlPoly_single"],
        ["CtrlDensity_high", "CtrlPoly_single"], ["CtrlDensity_high", "CtrlPoly_single"], ["CtrlPoly_single"]]
    params = SamplingParams(400, top_p=0.95, max_bars=6)
    for r in generate_riffs(model, tok, cfg, params, Draws(4, 2), RiffSpec(asked=asked)):
        toks = [tok[i] for i in r.ids]
        opened = [toks[j + 1:j + 3] for j, t in enumerate(toks) if t == "Bar_None"]
        want = [b[:2] for b in ([["CtrlDensity_low", "CtrlPoly_single"]] * 2 +
                                [["CtrlDensity_high", "CtrlPoly_single"]] * 2)]
        assert opened[:4] == want[:len(opened[:4])], opened
        assert all(b[0] == "CtrlPoly_single" for b in opened[4:]), opened


def test_density_guard_holds_each_bar():
    """On the shipped model, with the guard the generated bars have their own bar's asked density (measured from
    the notes: bar 3 gets bar 3's, not bar 1's) more often than without it (a bar whose strings all ring when
    it still owes onsets may end short: the guard never dead-ends a riff)."""
    loaded = load_run()
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg

    def densities(guard: bool) -> list[tuple[str, str]]:
        asked = conditions(tok, density="1-2:high,3-4:low", time_signature="4/4", guard=guard)
        out = []
        params = SamplingParams(500, top_p=0.95, max_bars=4)
        for r in generate_riffs(model, tok, cfg, params, Draws(6, 5), RiffSpec(asked=asked)):
            sigs = [(t.time, t.numerator, t.denominator) for t in r.gs.score.time_signatures]
            for k, bar in enumerate(controls_per_bar(notes_of(r.gs), r.gs.score.ticks_per_quarter, sigs)):
                if bar:
                    out.append((bar["Density"], "high" if k < 2 else "low"))
        return out

    guarded, unguarded = densities(True), densities(False)
    hits = lambda pairs: sum(got == want for got, want in pairs) / len(pairs)  # noqa: E731
    assert len(guarded) >= 12 and {w for _, w in guarded} == {"high", "low"}
    # The shipped model alone holds some of it (71% of these bars for the model of 1,688 steps, 18% for an older
    # one); the guard holds it all.
    assert hits(guarded) >= 0.85 and hits(guarded) > hits(unguarded), (guarded, unguarded)
    assert all(got == want for got, want in guarded if want == "low")  # at most: always within reach


def test_style_implies_its_usual_meter(control_run):
    loaded = load_run(control_run)
    _, tok, _ = loaded.model, loaded.tokenizer, loaded.cfg
    seen = Seen({"Style": {"metal": 40, "folk": 40}}, style_meters={"metal": {"3/4": 30, "4/4": 10}})
    meter = lambda **kw: [tok[i] for i in conditions(tok, style="metal", seen=seen, **kw).meter]  # noqa: E731
    assert meter() == ["TimeSig_3/4"]
    assert meter(guard=False) == [] and meter(continuing=True) == []
    assert meter(time_signature="4/4") == ["TimeSig_4/4"]  # what the user names wins


@pytest.mark.parametrize("option,value,known", [("--density", "huge", "use one of: low, mid"),
                                                 ("--style", "jazz", "folk, metal"),
                                                 ("--time-signature", "13/16", "4/4")])
def test_unknown_values_list_the_known_ones(control_run, tmp_path, option, value, known):
    r = CliRunner().invoke(main, ["sample", "--run", str(control_run), "--out", str(tmp_path / "r.mid"),
                                  option, value, "--device", "cpu"])
    assert r.exit_code == 2
    assert option in r.output or "time signature" in r.output
    assert known in r.output


def test_control_option_without_controls_names_the_fix(plain_run, tmp_path):
    r = CliRunner().invoke(main, ["sample", "--run", str(plain_run), "--out", str(tmp_path / "r.mid"),
                                  "--key", "E:minor", "--device", "cpu"])
    assert r.exit_code == 2
    assert "without control tokens" in r.output and "data.controls=true" in r.output


def test_position_without_controls_still_fingers(plain_run, tmp_path):
    """--position on a run without controls keeps its old meaning (fret() fingers there) rather than erroring."""
    r = CliRunner().invoke(main, ["sample", "--run", str(plain_run), "--out", str(tmp_path / "r.mid"),
                                  "--position", "7", "--time-signature", "3/4", "--bars", "2", "--device", "cpu"])
    assert r.exit_code == 0, r.output


def test_hand_position_without_controls_names_the_fix(plain_run, tmp_path):
    r = CliRunner().invoke(main, ["sample", "--run", str(plain_run), "--out", str(tmp_path / "r.mid"),
                                  "--hand-position", "7", "--device", "cpu"])
    assert r.exit_code == 2 and not (tmp_path / "r.mid").exists()
    assert "--hand-position" in r.output and "data.controls=true" in r.output and "--position" in r.output


def test_tempo_alone_follows_the_models_time_signature(control_run):
    """Every REMI bar here states its TimeSig: asked for a tempo alone, the model picks the time signature and
    the tempo comes right after it, and the stream stays grammatical."""
    loaded = load_run(control_run)
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    asked = conditions(tok, tempo=140)
    assert [tok[i] for i in asked.meter][0] == "Position_0"
    params = SamplingParams(60, top_p=0.95, max_bars=2)
    for r in generate_riffs(model, tok, cfg, params, Draws(2, 0), RiffSpec(asked=asked)):
        toks = [tok[i] for i in r.ids]
        assert toks[0] == "BOS_None" and toks[1] == "Bar_None" and toks[2].startswith("TimeSig_")
        assert toks[3:5] == ["Position_0", "Tempo_" + toks[4].split("_")[1]] and abs(float(toks[4][6:]) - 140) < 10
        body = [i for i in r.ids if tok[i] not in ("BOS_None", "EOS_None")]
        assert tok.tokens_errors(miditok.TokSequence(ids=body)) == 0


def test_eval_scores_model_and_ngram_on_the_plain_stream(control_run):
    """`guitarformer eval` reads what training validates on: the stream without control tokens, for the model and
    for the n-gram floor alike (an n-gram fitted and scored with controls is another task)."""
    loaded = load_run(control_run)
    _, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    part = TokenSplit(Path(cfg.data.dataset), "train")
    plain = plain_tokens(part, tok)
    assert 0 < len(plain) < len(part)  # the dataset has control tokens, and they are gone
    assert not any(tok[int(i)].startswith("Ctrl") for i in plain)
    res = evaluate_run(control_run, options=EvalOptions(split="train", device="cpu", samples=False))
    assert len(plain) - 2 <= res["ngram"]["tokens"] <= len(plain)
    assert len(plain) - 2 * (len(plain) // cfg.model.block_size + 1) <= res["likelihood"]["tokens"] <= len(plain)
