"""Fine-tuning (`train --init`): the shipped model on a handful of tiny files in a NEW style folder.

The vocabulary grows by exactly the new style, the init rows are unchanged and the model's predictions over the
old vocabulary are the shipped model's at step 0; the run samples the new style, resumes exactly and says where it
came from; datasets of other tokens and clashing architectures are refused with the fix.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import symusic
import torch
from click.testing import CliRunner

from guitarformer.app.loaded import run_info
from guitarformer.cli import main
from guitarformer.config import Config, DataConfig, ModelConfig, load_config
from guitarformer.data.prepare import PrepareOptions, prepare
from guitarformer.vocab.tab_tokens import strip_controls, tab_layout_of
from guitarformer.vocab.tokenization import build_tokenizer, load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.models import build_model
from guitarformer.pretrained import pretrained_dir
from guitarformer.runs.rundir import has_pretrained
from guitarformer.runs import checkpoint_of, load_run, named_checkpoint, read_run
from guitarformer.runs.checkpoint import load_checkpoint, save_checkpoint
from guitarformer.training.init import FINETUNE, finetune_defaults, init_config, init_weights, load_init
from guitarformer.training.data import Data
from guitarformer.training.loop import evaluate, train
from helpers.reliability import write_riffs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread"),  # fine-tunes of the shipped model
              pytest.mark.skipif(not has_pretrained(), reason="no shipped model in this checkout")]

NEW_STYLE = "surf"  # not among the shipped model's styles

SHIPPED_VOCAB = len(load_tokenizer(pretrained_dir() / "tokenizer.json"))  # a new style's token comes after these


@pytest.fixture(scope="module")
def tabs(tmp_path_factory) -> Path:
    """Six tiny riffs in a folder named after a style the shipped model does not know."""
    root = tmp_path_factory.mktemp("tabs")
    write_riffs(root / NEW_STYLE, 6)
    return root


@pytest.fixture(scope="module")
def like_dataset(cache_root, tabs, tmp_path_factory) -> Path:
    init = load_init("pretrained")
    out = tmp_path_factory.mktemp("like") / "ds"
    prepare([tabs], out, init.cfg.data, options=PrepareOptions(workers=1, progress=False), like=init.tokenizer)
    return out


def _cfg(dataset: Path, **train):
    """The default config (a fine-tune takes the architecture from the init run) for a few CPU steps."""
    cfg = load_config(None)
    cfg.data.dataset = str(dataset)
    cfg.train.init = "pretrained"
    for k, v in {**dict(max_steps=4, batch_size=2, eval_interval=2, log_interval=1, sample_interval=0,
                        time_budget_min=0.0, compile=False, device="cpu", dtype="float32"), **train}.items():
        setattr(cfg.train, k, v)
    return cfg


@pytest.fixture(scope="module")
def fine_tuned(like_dataset, tmp_path_factory) -> tuple[Path, dict]:
    run = tmp_path_factory.mktemp("ft") / "run"
    return run, train(_cfg(like_dataset), run_dir=run, progress=False)


def test_prepare_like_adds_exactly_the_new_style(like_dataset):
    init = load_init("pretrained")
    data = Data(_cfg(like_dataset), like_dataset)
    old, new = init.tokenizer.vocab, data.tokenizer.vocab
    assert len(new) == len(old) + 1
    assert all(new[t] == i for t, i in old.items())  # every old id names the same token
    assert new[f"CtrlStyle_{NEW_STYLE}"] == len(old)
    seqs = data.train.split.tokens
    assert int((torch.as_tensor(seqs.astype("int64")) == len(old)).sum()) == 6  # one style token per file


def test_step_zero_keeps_the_shipped_model(like_dataset):
    """Old rows identical to the shipped weights; the new row is the mean style; over the old vocabulary the
    fine-tune's logits are the shipped model's (no silent re-initialisation)."""
    init = load_init("pretrained")
    cfg = init_config(_cfg(like_dataset), init)
    data = Data(cfg, like_dataset)
    cfg.model.vocab_size = len(data.tokenizer)
    model = build_model(cfg.model)
    assert init_weights(model, init, data.tokenizer) == [f"CtrlStyle_{NEW_STYLE}"]
    V0 = len(init.tokenizer)
    shipped = load_checkpoint(init.checkpoint)["model"]["embed.wte.weight"].float()
    emb = model.state_dict()["embed.wte.weight"]
    assert torch.equal(emb[:V0], shipped)
    styles = [i for t, i in init.tokenizer.vocab.items() if t.startswith("CtrlStyle_")]
    assert torch.allclose(emb[V0], shipped[styles].mean(0), atol=1e-3)  # stored in the shipped dtype's precision
    assert model.lm_head.weight.data_ptr() == model.embed.wte.weight.data_ptr()  # still tied

    loaded = load_run(pretrained_dir())

    base, _, _ = loaded.model, loaded.tokenizer, loaded.cfg
    ids = strip_controls(data.tokenizer, [int(i) for i in data.train.split.tokens[:300]])  # old ids only
    x = torch.tensor([ids])
    model.eval()
    with torch.no_grad():
        ours, _ = model(x)
        theirs, _ = base.float()(x)
    assert ours.shape[-1] == V0 + 1
    # The shipped model's logits are log-probabilities (model.copy): the new token takes a sliver of the mass,
    # which moves the old tokens' by about that much (3e-4 here) and nothing else.
    assert (ours[..., :V0] - theirs).abs().max() < 1e-3
    assert ours[..., V0].exp().max() < 1e-2


def test_fine_tune_run_starts_from_the_shipped_loss(fine_tuned, tabs, tmp_path):
    """The run's step-0 val loss is the initialised model's; it is near the shipped model's own loss on the same
    files (without the new style token, which the shipped model cannot read) and far from random weights'."""
    run, summary = fine_tuned
    init = summary["init"]
    assert init["from"] == "pretrained" and init["added_tokens"] == [f"CtrlStyle_{NEW_STYLE}"]
    assert init["vocab_size"] == SHIPPED_VOCAB and init["step"] is not None
    assert json.loads((run / "init.json").read_text()) == init
    assert load_config(str(run / "config.yaml")).train.init == "pretrained"

    # The same files prepared like the shipped model, but in no style folder: the shipped model's ids exactly.
    flat = tmp_path / "flat"
    shutil.copytree(tabs / NEW_STYLE, flat)
    shipped = load_init("pretrained")
    prepare([flat], tmp_path / "flat-ds", shipped.cfg.data, options=PrepareOptions(workers=1, progress=False),
            like=shipped.tokenizer)
    loaded = load_run(pretrained_dir())
    base, _, _ = loaded.model, loaded.tokenizer, loaded.cfg
    cfg = _cfg(tmp_path / "flat-ds")
    data = Data(init_config(cfg, shipped), tmp_path / "flat-ds")
    assert len(data.tokenizer) == SHIPPED_VOCAB
    shipped_loss = evaluate(base.float(), data, "decoder", torch.device("cpu"), torch.float32, 2)["loss"]
    assert init["val_loss_at_init"] == pytest.approx(shipped_loss, abs=0.03)
    assert init["val_loss_at_init"] < 0.5 * torch.log(torch.tensor(SHIPPED_VOCAB + 1.0)).item()  # random: ~6.1
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["loss"] for m in metrics if m["kind"] == "val" and m["step"] == 0] == [init["val_loss_at_init"]]


def test_fine_tuned_run_samples_its_new_style_and_infills(fine_tuned, tabs, tmp_path):
    run, _ = fine_tuned
    out = tmp_path / "riff.mid"
    r = CliRunner().invoke(main, ["sample", "--run", str(run), "--out", str(out), "--tab", str(tmp_path / "r.txt"),
                                  "--style", NEW_STYLE, "--bars", "2", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "fine-tuned from pretrained" in r.output  # the summary names where the run came from
    assert sum(len(t.notes) for t in symusic.Score(str(out)).tracks) > 0
    assert (tmp_path / "r.txt").read_text().count("|") > 0
    assert run_info(load_run(run, device="cpu")).init == "pretrained"
    r = CliRunner().invoke(main, ["infill", str(tabs / NEW_STYLE / "riff0.mid"), "--bars", "2-3", "--out",
                                  str(tmp_path / "new.mid"), "--run", str(run), "--device", "cpu"])
    assert r.exit_code == 0 and "bars 2-3 written again" in r.output, r.output


def test_sample_says_which_run_it_takes_and_the_way_back(fine_tuned, tmp_path, monkeypatch):
    """A fine-tuned run under ./runs becomes the default model: `sample` says it took it, why, and that
    `--run pretrained` goes back to the shipped model, which then says it is the one used."""
    run, _ = fine_tuned
    shutil.copytree(run, tmp_path / "runs" / "my-tabs")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["sample", "--out", "a.mid", "--bars", "1", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "run runs/my-tabs (" in r.output and "the newest under ./runs, as no --run was named" in r.output
    assert "--run pretrained: the shipped model" in r.output
    r = CliRunner().invoke(main, ["sample", "--run", "pretrained", "--out", "b.mid", "--bars", "1", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "using the shipped model" in r.output and "runs/my-tabs" not in r.output


def test_fine_tune_resumes_exactly(like_dataset, tmp_path):
    cfg = _cfg(like_dataset, num_threads=1)  # one thread both times: a count chosen by the machine's load may differ
    full = train(copy.deepcopy(cfg), run_dir=tmp_path / "full", progress=False)
    train(copy.deepcopy(cfg), run_dir=tmp_path / "split", progress=False, stop_at=2)
    split = train(load_config(None), resume=tmp_path / "split", progress=False)
    a = load_checkpoint(tmp_path / "full" / "ckpt" / "last.pt")["model"]
    b = load_checkpoint(tmp_path / "split" / "ckpt" / "last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert split["init"] == full["init"] | {"val_loss_at_init": split["init"]["val_loss_at_init"]}
    assert split["init"]["added_tokens"] == [f"CtrlStyle_{NEW_STYLE}"]


# ---------------------------------------------------------------- refusals


def test_dataset_prepared_from_scratch_is_refused_with_the_fix(cache_root, tabs, tmp_path):
    """The same files prepared in the other tab layout than the shipped model's, and prepared in its layout but
    without --like (they number the styles otherwise): one line each, and the fix."""
    shipped = tab_layout_of(load_init("pretrained").tokenizer)
    other = 2 if shipped == 3 else 3
    cfg = load_config(None)
    cfg.data.controls = True
    cfg.data.infill = 0.3
    cfg.data.tab_layout = other
    prepare([tabs], tmp_path / "own", cfg.data, options=PrepareOptions(workers=1, progress=False))
    with pytest.raises(GuitarformerError) as e:
        train(_cfg(tmp_path / "own"), run_dir=tmp_path / "run", progress=False)
    assert f"tab_layout {other}, the init run's {shipped}" in e.value.problem and "--like pretrained" in e.value.fix
    cfg.data.tab_layout = shipped
    prepare([tabs], tmp_path / "own2", cfg.data, options=PrepareOptions(workers=1, progress=False))
    with pytest.raises(GuitarformerError) as e:
        train(_cfg(tmp_path / "own2"), run_dir=tmp_path / "run", progress=False)
    assert "styles" in e.value.problem and "--like pretrained" in e.value.fix
    assert not (tmp_path / "run" / "ckpt").exists()  # refused before the run directory is made


def test_a_fine_tune_inherits_the_init_runs_tab_layout(tmp_path):
    """A run saved before data.tab_layout existed has none in its config (which alone would say the default, 3): the
    migration of its folder (format 1) takes its tokenizer's layout, and a fine-tune prepares and trains that one."""
    state = load_checkpoint(named_checkpoint("pretrained"))
    state["config"]["data"].pop("tab_layout", None)
    run = tmp_path / "old"
    save_checkpoint(run / "ckpt" / "best.pt", state)
    build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=2, controls=True)).save(run / "tokenizer.json")
    init = load_init(run)
    assert init.cfg.data.tab_layout == 2  # its tokenizer's (runs/migrate.py), not the default
    assert init_config(load_config(None), init).data.tab_layout == 2
    shipped = load_init("pretrained")
    assert init_config(load_config(None), shipped).data.tab_layout == tab_layout_of(shipped.tokenizer)


def test_other_tokenizer_is_refused(cache_root, tabs, tmp_path):
    cfg = load_config(None)
    cfg.data.tokenizer = "REMI"
    prepare([tabs], tmp_path / "remi", cfg.data, options=PrepareOptions(workers=1, progress=False))
    r = CliRunner().invoke(main, ["train", "--init", "pretrained", "--data", str(tmp_path / "remi"),
                                  "--run-dir", str(tmp_path / "run"), "--max-steps", "1", "--device", "cpu"])
    assert r.exit_code == 2
    assert "tokenizer REMI, the init run's TabREMI" in r.output and "--like pretrained" in r.output


def test_clashing_architecture_is_refused(like_dataset, tmp_path):
    r = CliRunner().invoke(main, ["train", "--init", "pretrained", "--data", str(like_dataset), "--set",
                                  "model.n_layer=8", "--run-dir", str(tmp_path / "run"), "--max-steps", "1"])
    assert r.exit_code == 2
    shipped_layers = read_run("pretrained").cfg.model.n_layer
    assert "model.n_layer=8" in r.output and f"n_layer={shipped_layers}" in r.output
    assert "drop the model options" in r.output
    r = CliRunner().invoke(main, ["train", "--init", "pretrained", "--config", "tiny", "--data", str(like_dataset),
                                  "--run-dir", str(tmp_path / "run"), "--max-steps", "1"])
    assert r.exit_code == 2 and "its weights fit only its own architecture" in r.output


def test_init_and_resume_together_are_refused(tmp_path):
    r = CliRunner().invoke(main, ["train", "--init", "pretrained", "--resume", str(tmp_path)])
    assert r.exit_code == 2 and "--init starts a new run" in r.output


def test_prepare_like_takes_no_other_token_settings(tabs, tmp_path):
    r = CliRunner().invoke(main, ["prepare", str(tabs), "--like", "pretrained", "--tokenizer", "REMI", "--out",
                                  str(tmp_path / "ds")])
    assert r.exit_code == 2 and "--like takes every token setting" in r.output


def test_unknown_init_is_refused(tmp_path):
    with pytest.raises(GuitarformerError, match="neither a run directory nor a checkpoint"):
        load_init(tmp_path / "nowhere")


def test_run_named_pretrained_is_the_shipped_model_unless_a_folder_says_otherwise(tmp_path, monkeypatch):
    """`sample --run pretrained` names the shipped model, as `--init` and `--like` do; a run folder of that name in
    the working directory is the user's and wins."""
    monkeypatch.chdir(tmp_path)
    assert checkpoint_of("pretrained") == named_checkpoint("pretrained")
    assert checkpoint_of("pretrained").parent.parent == pretrained_dir()
    r = CliRunner().invoke(main, ["sample", "--run", "pretrained", "--bars", "2", "--out", "riff.mid"])
    assert r.exit_code == 0 and "using the shipped model: see" in r.output and Path("riff.mid").is_file()
    (tmp_path / "pretrained" / "ckpt").mkdir(parents=True)
    (tmp_path / "pretrained" / "ckpt" / "last.pt").write_bytes(b"")
    assert checkpoint_of("pretrained") == Path("pretrained") / "ckpt" / "last.pt"


# ---------------------------------------------------------------- real files


def test_real_files_in_a_new_style(cache_root, shared_guitar, tmp_path):
    """Three real Guitar Pro files (techniques, real fingerings) in a `metal` folder: one new token; the shipped
    model, grown by it, predicts them as the shipped model does."""
    files = sorted((shared_guitar / "pyguitarpro").rglob("*.gp5"))[:3]
    if len(files) < 3:
        pytest.skip("fewer than 3 .gp5 files in the shared data")
    (tmp_path / "tabs" / "metal").mkdir(parents=True)
    for f in files:  # copied into the test's temporary folder (a symlink out of the input folder is not followed)
        shutil.copy(f, tmp_path / "tabs" / "metal" / f.name)
    init = load_init("pretrained")
    meta = prepare([tmp_path / "tabs"], tmp_path / "ds", init.cfg.data, PrepareOptions(workers=1, progress=False),
                   like=init.tokenizer)
    assert meta["status"].get("ok", 0) >= 2 and meta["vocab_size"] == SHIPPED_VOCAB + 1
    cfg = init_config(_cfg(tmp_path / "ds"), init)
    data = Data(cfg, tmp_path / "ds")
    cfg.model.vocab_size = len(data.tokenizer)
    model = build_model(cfg.model)
    assert init_weights(model, init, data.tokenizer) == ["CtrlStyle_metal"]
    loaded = load_run(pretrained_dir())
    base, _, _ = loaded.model, loaded.tokenizer, loaded.cfg
    ids = strip_controls(data.tokenizer, [int(i) for i in data.train.split.tokens[:400]])
    model.eval()
    with torch.no_grad():
        ours, theirs = model(torch.tensor([ids]))[0], base.float()(torch.tensor([ids]))[0]
    assert (ours[..., :SHIPPED_VOCAB] - theirs).abs().max() < 1e-3  # log-probabilities: the new token's sliver aside


def test_an_encoder_decoder_run_of_ones_own_fine_tunes_too(like_dataset, tmp_path):
    """--init RUN_DIR of an encoder-decoder (here an untrained tiny one with the shipped model's tokens): the
    architecture comes from it, the shared embedding and output grow by the new style, old rows stay."""
    shipped = load_init("pretrained")
    own = tmp_path / "own-encdec"
    cfg = Config(data=copy.deepcopy(shipped.cfg.data))
    cfg.model = ModelConfig(prev_token=False, copy=False,
                            kind="encoder_decoder", vocab_size=len(shipped.tokenizer), block_size=64,
                            src_block_size=64, n_layer=1, n_head=2, n_embd=32)
    shipped.tokenizer.save(own / "tokenizer.json")
    torch.manual_seed(0)
    weights = build_model(copy.deepcopy(cfg.model)).state_dict()
    save_checkpoint(own / "ckpt" / "best.pt", {"config": cfg.to_dict(), "model": weights, "step": 0})

    ft = _cfg(like_dataset, max_steps=1, eval_interval=1)
    ft.train.init = str(own / "ckpt" / "best.pt")  # a checkpoint file names its run too
    summary = train(ft, run_dir=tmp_path / "run", progress=False)
    assert summary["init"]["added_tokens"] == [f"CtrlStyle_{NEW_STYLE}"]
    saved = load_checkpoint(tmp_path / "run" / "ckpt" / "last.pt")
    assert saved["config"]["model"]["kind"] == "encoder_decoder" and saved["config"]["model"]["n_embd"] == 32
    assert saved["model"]["lm_head.weight"].shape == (len(shipped.tokenizer) + 1, 32)


def _train_config(args: list[str], tmp_path, monkeypatch):
    """The config `guitarformer train ARGS` hands the training loop (which is not run)."""
    seen = {}

    def fake_train(cfg, **kwargs):
        seen["cfg"] = cfg
        return {}

    monkeypatch.setattr("guitarformer.training.loop.train", fake_train)
    r = CliRunner().invoke(main, ["train", "--data", str(tmp_path / "ds"), "--run-dir", str(tmp_path / "run"), *args])
    assert r.exit_code == 0, r.output
    return seen["cfg"]


def test_init_takes_the_fine_tune_recipe_unless_told_otherwise(tmp_path, monkeypatch):
    """The preset's lr and steps train random weights; `train --init` takes FINETUNE's for each one not given."""
    preset = load_config(None)
    assert FINETUNE["train.lr"] < preset.train.lr and FINETUNE["train.max_steps"] < preset.train.max_steps
    cfg = _train_config(["--init", "pretrained"], tmp_path, monkeypatch)
    assert (cfg.train.lr, cfg.train.max_steps) == (FINETUNE["train.lr"], FINETUNE["train.max_steps"])
    cfg = _train_config(["--init", "pretrained", "--max-steps", "7", "--set", "train.lr=2e-3"], tmp_path, monkeypatch)
    assert (cfg.train.lr, cfg.train.max_steps) == (2e-3, 7)
    cfg = _train_config(["--init", "pretrained", "--set", "train.lr=3e-3"], tmp_path, monkeypatch)
    assert (cfg.train.lr, cfg.train.max_steps) == (3e-3, FINETUNE["train.max_steps"])  # the preset's value, asked
    cfg = _train_config([], tmp_path, monkeypatch)  # random weights: the preset's
    assert (cfg.train.lr, cfg.train.max_steps) == (preset.train.lr, preset.train.max_steps)
    cfg = _train_config(["--init", "pretrained", "--config", "decoder-small"], tmp_path, monkeypatch)
    assert cfg.train.lr == preset.train.lr  # a config named is taken as it is


def test_finetune_defaults_keep_what_is_given():
    cfg = finetune_defaults(load_config(None), {"train.max_steps"})
    assert cfg.train.lr == FINETUNE["train.lr"] and cfg.train.max_steps == load_config(None).train.max_steps
