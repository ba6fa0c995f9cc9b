"""Bad command lines: empty or junk datasets, bad configs, missing paths, a prompt that is not music: one clear
line each, a traceback only with --debug (docs/results/RELIABILITY.md).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from guitarformer.errors import GuitarformerError
from helpers.reliability import FIXTURES, assert_clear_error, cli, train_args

# ---------------------------------------------------------------- bad command lines


def test_empty_and_junk_datasets(tmp_path, cache_root):
    (tmp_path / "empty").mkdir()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("Verse: play it slow\nChorus: G C D\n")
    (junk / "scan.pdf").write_bytes(b"%PDF-1.4")
    (junk / "drums.mid").write_bytes((FIXTURES / "io" / "drums_only.mid").read_bytes())
    for name in ("empty", "junk"):
        r = cli("prepare", tmp_path / name, "--out", tmp_path / f"ds_{name}", "--workers", "1")
        assert_clear_error(r, "gave usable guitar music")  # the manifest is still written, with every reason
        assert "ok 0" in r.stdout
        assert_clear_error(cli("train", "--config", "tiny", "--data", tmp_path / f"ds_{name}"), "no training tokens")
    reasons = {Path(d["path"]).name: d["reason"]
               for d in map(json.loads, (tmp_path / "ds_junk" / "manifest.jsonl").read_text().splitlines())}
    assert "unsupported file type" in reasons["scan.pdf"]
    assert "no 6- or 7-line tab staff" in reasons["notes.txt"]
    assert "no track but percussion" in reasons["drums.mid"]


def test_bad_config_files_and_overrides(tmp_path, cache_root):
    cases = {
        "model:\n  n_layerz: 2\n": "unknown config key model.n_layerz",
        "model:\n  n_layer: [1, 2]\n": "is not a valid int",
        "train:\n  lr: fast\n": "is not a valid float",
        "model: {n_layer: 2\n": "not valid YAML",
        "- 1\n- 2\n": "must be a mapping",
        "nosuchsection:\n  a: 1\n": "nosuchsection",
    }
    for i, (text, needle) in enumerate(cases.items()):
        f = tmp_path / f"c{i}.yaml"
        f.write_text(text)
        r = cli("train", "--config", f)
        assert r.exit_code == 2 and "Traceback" not in r.stderr and needle in r.stderr, (text, r.stderr)
    for flag, needle in (("nodot", "bad override"), ("model.n_layer", "bad override"),
                         ("model.n_layer=two", "not a valid int"), ("train.nope=1", "unknown config key")):
        assert_clear_error(cli("train", "--config", "tiny", "--set", flag), needle)


def test_missing_paths_and_runs_without_checkpoints(tmp_path, cache_root):
    (tmp_path / "norun").mkdir()
    (tmp_path / "afile").write_text("x")
    assert_clear_error(cli("sample", "--run", tmp_path / "norun", "--out", tmp_path / "x.mid"), "no checkpoint")
    assert_clear_error(cli("eval", "--run", tmp_path / "norun"), "no checkpoint")
    assert_clear_error(cli("train", "--resume", tmp_path / "norun"), "no checkpoint to resume")
    assert_clear_error(cli("sample", "--checkpoint", tmp_path / "nope.pt", "--out", tmp_path / "x.mid"), "does not exist")
    assert_clear_error(cli("train", "--config", "tiny", "--data", tmp_path / "afile"), "does not exist")
    assert_clear_error(cli("info", tmp_path / "norun"), "incomplete")
    assert_clear_error(cli("tab", tmp_path / "afile"), "")


def test_run_dir_under_a_file_is_a_clear_line(tmp_path, cache_root, rel_dataset):
    (tmp_path / "afile").write_text("x")
    r = cli(*train_args(rel_dataset, tmp_path / "afile" / "run", "--max-steps", "2"))
    assert_clear_error(r, "cannot write the run directory")


def test_prompt_that_is_not_music(tmp_path, cache_root, rel_run):
    prose = tmp_path / "notes.txt"
    prose.write_text("Play the riff twice, then the chorus.\n")
    garbage = tmp_path / "garbage.mid"
    garbage.write_bytes(random.Random(3).randbytes(2000))
    pdf = tmp_path / "scan.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    for prompt, needle in ((prose, "not readable music"), (garbage, "not readable music"), (pdf, "not readable music"),
                           (tmp_path / "missing.mid", "does not exist")):
        r = cli("sample", "--run", rel_run, "--out", tmp_path / "x.mid", "--prompt", prompt, "--device", "cpu")
        assert_clear_error(r, needle)
    assert not (tmp_path / "x.mid").exists()


def test_debug_flag_shows_the_traceback(tmp_path, cache_root):
    from guitarformer.cli import main

    r = CliRunner().invoke(main, ["--debug", "train", "--resume", str(tmp_path)])
    assert isinstance(r.exception, GuitarformerError)  # re-raised for the traceback


