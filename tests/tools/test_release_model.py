"""tools/release_model.py end to end on a tiny setting, and the shipped-model folder it writes (guitarformer/pretrained)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from guitarformer.data.corpus import labels_taken
from guitarformer.errors import GuitarformerError
from guitarformer.compose.riffs import Draws, generate_riffs
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.pretrained import MAX_BYTES, pretrained_dir
from guitarformer.runs.rundir import RunDir, has_pretrained, shipped_note
from guitarformer.runs import export
from guitarformer.runs.export import shipping_dtype
from guitarformer.runs import load_run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]  # a release trains and measures
SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "release_model.py"


def _release_script():
    spec = importlib.util.spec_from_file_location("release_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["release_model"] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def release(cache_root, tmp_path_factory):
    """A tiny release: the first 60 source files (the fewest whose pieces fill val and test: splits follow the
    notes), 8 steps of each model kind."""
    tmp = tmp_path_factory.mktemp("release")
    argv = ["--config", "tiny", "--limit", "60", "--steps", "8", "--set", "model.block_size=256",
            "--set", "model.src_block_size=128", "--out", str(tmp / "pre"), "--work", str(tmp / "work"),
            "--controls", "tempo,density", "--num-samples", "1", "--bars", "1", "--num-infill", "3",
            "--form-samples", "2", "--device", "cpu", "--encdec", "--quiet"]
    assert _release_script().main(argv) == 0
    return tmp / "pre", json.loads((tmp / "work" / "release.json").read_text())


def test_the_release_writes_a_loadable_model_with_its_card(release):
    out, report = release
    assert has_pretrained(out)
    state = torch.load(RunDir(out).checkpoint("best"), weights_only=True)  # plain tensors and values only
    assert set(state) >= {"model", "config"} and "optimizer" not in state
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) == report["exported"]["bytes"] <= MAX_BYTES
    loaded = load_run(out)
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    assert cfg.data.dataset is None and cfg.data.controls and cfg.data.infill == 0.3
    assert any(t.startswith("CtrlKey_") for t in tok.vocab) and "FillBar_None" in tok.vocab
    assert any(t.startswith("CtrlStyle_") for t in tok.vocab) == labels_taken()  # the tune types, where prepare takes them
    riff = generate_riffs(model, tok, cfg, SamplingParams(40, top_p=0.95, max_bars=2), Draws(1, 0), device="cpu")[0]
    assert riff.new_bars >= 1


def test_the_card_carries_the_measured_numbers(release):
    out, report = release
    card = (out / "MODEL_CARD.md").read_text()
    dec, enc = report["scores"]
    assert (dec["kind"], enc["kind"]) == ("decoder", "encoder_decoder")
    for s in (dec, enc):
        assert s["steps"] == 8 and s["val_nll_note"] > s["val_nll_token"] > 0  # more than one token per note
        assert f"{s['val_nll_token']:.3f} | {s['val_nll_note']:.3f}" in card
        assert s["infill"]["spans"] > 0 and s["infill"]["nll_both"] > 0
        assert set(s["controls"]) == {"tempo", "density"}
        assert s["form"]["samples"] == 2 and s["form"]["form_samples"] == 2  # alone, and with a tune's form
    assert dec["meter"]["riffs"] == 2 and dec["meter"]["tunes_notes_per_s"] > 0 and not enc["meter"]
    assert f"play {dec['meter']['own_notes_per_s']:.2f} notes a second" in card
    chosen = _release_script().default_meter_by_measure(dec["meter"])
    assert chosen in ("auto", "none") and load_run(out).cfg.sample.time_signature == (None if chosen == "none" else chosen)
    corpus = report["corpus"]
    assert corpus["test_tunes"] >= 1 and corpus["val_keyed"] >= 1 and 0 <= corpus["key_estimate_agrees_val"] <= 1
    assert sum(corpus["styles"].values()) == corpus["tunes"] and f"{corpus['tunes']} tunes, styles" in card
    assert "--steps 8" in card and "decoder (shipped)" in card and "| encoder_decoder | tempo |" in card


def test_a_run_already_trained_by_the_recipe_is_released_without_training_again(release, tmp_path):
    out, report = release
    run = Path(report["scores"][0]["run"])
    argv = ["--config", "tiny", "--limit", "60", "--from-run", str(run), "--set", "model.block_size=256",
            "--out", str(tmp_path / "pre"), "--work", str(tmp_path / "work"), "--controls", "tempo",
            "--num-samples", "1", "--bars", "1", "--num-infill", "2", "--form-samples", "1", "--device", "cpu",
            "--quiet"]
    assert _release_script().main(argv) == 0
    again = json.loads((tmp_path / "work" / "release.json").read_text())["scores"][0]
    assert again["run"] == str(run) and again["steps"] == 8 and again["val_nll_token"] == report["scores"][0]["val_nll_token"]
    assert not (tmp_path / "work" / "decoder").exists()  # nothing was trained
    card = (tmp_path / "pre" / "MODEL_CARD.md").read_text()
    assert "trained by `guitarformer train`" in card and "--from-run" in card
    with pytest.raises(SystemExit, match="not the release recipe"):  # another corpus than the one it names
        _release_script().main([*argv[:3], "7", *argv[4:]])
    # The encoder-decoder too: measured from its run, not trained again; a decoder run is no encoder-decoder.
    enc = Path(report["scores"][1]["run"])
    both = [a.replace(str(tmp_path / "work"), str(tmp_path / "work2")) for a in argv] + ["--encdec", "--encdec-run",
                                                                                          str(enc)]
    assert _release_script().main(both) == 0
    scores = json.loads((tmp_path / "work2" / "release.json").read_text())["scores"]
    assert [s["kind"] for s in scores] == ["decoder", "encoder_decoder"] and scores[1]["run"] == str(enc)
    assert scores[1]["val_nll_token"] == report["scores"][1]["val_nll_token"]
    assert not (tmp_path / "work2" / "encoder_decoder").exists()
    with pytest.raises(SystemExit, match="--encdec-run .*not the release recipe"):
        _release_script().main([*both[:-1], str(run)])


def test_the_default_form_is_the_one_whose_riffs_repeat_nearest_the_tunes():
    """Ratios to the tunes' share, not differences: 30% and 52% against 43% (0.70x, 1.20x) is `auto`; 37% and 56%
    (0.86x, 1.30x) is `none`; a share missing leaves the choice to `sample`'s rule (None)."""
    choose = _release_script().default_form_by_measure
    assert choose({"samples_repeat_share": 0.302, "form_samples_repeat_share": 0.521}, 0.434) == "auto"
    assert choose({"samples_repeat_share": 0.373, "form_samples_repeat_share": 0.565}, 0.434) == "none"
    assert choose({"samples_repeat_share": 0.30, "form_samples_repeat_share": 0.58}, 0.424) == "auto"  # 0.71x, 1.37x
    assert choose({"samples_repeat_share": 0.373}, 0.434) is None
    assert choose({"samples_repeat_share": 0.0, "form_samples_repeat_share": 0.5}, 0.434) is None


def test_the_default_meter_is_drawn_only_where_that_brings_the_riffs_nearer_the_tunes():
    """Notes per second as ratios to the test tunes': 4.95 own against 4.21 drawn for tunes at 3.97 is `auto`;
    a model whose own meters are nearer keeps them ("none"); a figure missing leaves the run's setting (None)."""
    choose = _release_script().default_meter_by_measure
    assert choose({"own_notes_per_s": 4.95, "drawn_notes_per_s": 4.21, "tunes_notes_per_s": 3.97}) == "auto"
    assert choose({"own_notes_per_s": 4.05, "drawn_notes_per_s": 4.21, "tunes_notes_per_s": 3.97}) == "none"
    assert choose({"own_notes_per_s": 3.4, "drawn_notes_per_s": 4.9, "tunes_notes_per_s": 3.97}) == "none"  # 0.86x, 1.23x
    assert choose({"own_notes_per_s": 4.95, "tunes_notes_per_s": 3.97}) is None


def test_the_card_names_what_a_given_run_changed_from_the_preset():
    """A --from-run run's recipe is `guitarformer train` plus the settings it changed: its model's shape and batch
    are said, where it logged, evaluated and sampled is not."""
    from guitarformer.config import load_config, set_values

    preset = load_config()
    run = set_values(load_config(), {"model.n_embd": 192, "train.batch_size": 16, "train.eval_interval": 250,
                                     "data.dataset": "/somewhere", "train.sample_interval": 100000})
    assert _release_script()._changed_settings(run, preset) == ["model.n_embd=192", "train.batch_size=16"]
    assert _release_script()._changed_settings(preset, preset) == []


def test_weights_are_halved_only_where_full_precision_does_not_fit():
    w = {"a": torch.zeros(1000), "n": torch.zeros(3, dtype=torch.long)}
    assert shipping_dtype(w, 4000) == torch.float32
    assert shipping_dtype(w, 3999) == torch.float16
    assert shipping_dtype({"a": torch.full((1000,), 1e6)}, 3999) == torch.bfloat16  # beyond float16's range
    with pytest.raises(GuitarformerError, match="even in half precision"):
        shipping_dtype(w, 1999)


def test_the_package_folder_reports_whether_a_model_ships(tmp_path):
    assert pretrained_dir() == Path(__file__).resolve().parents[2] / "guitarformer" / "pretrained"
    assert not has_pretrained(tmp_path)
    assert "shipped model" in shipped_note() and "MODEL_CARD.md" in shipped_note()


def test_a_half_precision_export_loads_as_a_run_and_predicts_as_the_full_one(release, tmp_path, monkeypatch):
    _, report = release
    run = Path(report["scores"][0]["run"])
    monkeypatch.setattr(export, "MAX_BYTES", export.OTHER_FILES_BYTES + 150_000)  # fp32 (226 KB) does not fit
    done = export.export_run(run, "card", tmp_path / "half")
    assert done.dtype == "float16" and done.bytes <= export.MAX_BYTES
    loaded = load_run(run)
    full, _, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    loaded = load_run(tmp_path / "half")
    half, _, _ = loaded.model, loaded.tokenizer, loaded.cfg
    x = torch.randint(0, cfg.model.vocab_size, (1, 32))
    with torch.no_grad():
        a, b = full(x)[0], half(x)[0]
    assert next(half.parameters()).dtype == torch.float32 and torch.allclose(a, b, atol=2e-2)


def test_with_no_run_named_and_none_of_the_users_sampling_uses_the_shipped_model(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from helpers.tiny_runs import untrained_run

    import guitarformer.runs.rundir as runs_mod
    from guitarformer.cli import main
    from guitarformer.config import DataConfig
    from guitarformer.vocab.tokenization import build_tokenizer

    shipped = untrained_run(tmp_path / "shipped", build_tokenizer(DataConfig()), 128)
    (shipped / "ckpt" / "last.pt").rename(RunDir(shipped).checkpoint("best"))
    monkeypatch.setattr(runs_mod, "pretrained_dir", lambda: shipped.resolve())
    monkeypatch.setattr(runs_mod, "has_pretrained", lambda: True)
    monkeypatch.chdir(tmp_path)  # no runs/ here
    assert runs_mod.default_run() == shipped.resolve()
    r = CliRunner().invoke(main, ["sample", "--out", "riff.mid", "--bars", "2", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0].startswith("using the shipped model") and (tmp_path / "riff.mid").is_file()
    (tmp_path / "runs" / "mine").mkdir(parents=True)  # a run of the user's wins over the shipped model
    untrained_run(tmp_path / "runs" / "mine", build_tokenizer(DataConfig()), 128)
    assert runs_mod.default_run() == Path("runs") / "mine"
    monkeypatch.setattr(runs_mod, "has_pretrained", lambda: False)
    shutil.rmtree(tmp_path / "runs")
    with pytest.raises(GuitarformerError, match="no trained run"):
        runs_mod.default_run()
