"""`prepare`, `info`, `train` and `eval` as app functions over their requests (guitarformer.app): what the CLI
prints is what they say, and the Python API gets the same results and the same errors without click."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guitarformer.app import (EvalRequest, InfoRequest, PrepareRequest, TrainRequest, evaluate, find_dataset, info,
                              prepare, train)
from guitarformer.errors import GuitarformerError

FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_prepare_says_its_summary_and_where_it_wrote(riff_dir, tmp_path, cache_root):
    heard = []
    res = prepare(PrepareRequest(inputs=[riff_dir], out=tmp_path / "ds", workers=1),
                  lambda line, err: heard.append((line, err)))
    assert res.path == tmp_path / "ds" and res.meta["status"]["ok"] == 6
    assert [line for line, _ in heard] == res.lines and not res.warnings
    assert res.lines[-1] == f"wrote {tmp_path / 'ds'}  (next: guitarformer train --data {tmp_path / 'ds'})"
    assert info(InfoRequest(tmp_path / "ds")).lines == res.lines[:-1]  # the same summary, read back


def test_prepare_says_the_summary_before_the_error_of_unusable_files(tmp_path, cache_root):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "junk.mid").write_bytes(b"not a midi file")
    heard = []
    with pytest.raises(GuitarformerError, match="none of the 1 input files"):
        prepare(PrepareRequest(inputs=[tmp_path / "in"], out=tmp_path / "ds", workers=1),
                lambda line, err: heard.append(line))
    assert any("failed 1" in line for line in heard)


def test_prepare_like_takes_every_token_setting_from_the_run(tmp_path):
    for req in (PrepareRequest(inputs=[tmp_path], like="pretrained", config="tiny"),
                PrepareRequest(inputs=[tmp_path], like="pretrained", bpe_vocab=0),
                PrepareRequest(like="pretrained")):
        with pytest.raises(GuitarformerError, match="--like takes every token setting"):
            prepare(req)


def test_find_dataset_looks_up_a_bare_name_where_prepare_writes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "prepared" / "mine").mkdir(parents=True)
    assert find_dataset(Path("mine")) == (tmp_path / "data" / "prepared" / "mine").resolve()
    assert find_dataset(Path("no-such")) == Path("no-such") and find_dataset(None) is None


def test_info_of_a_run_gives_its_config(rel_run):
    lines = info(InfoRequest(rel_run)).lines
    assert lines[0] == (rel_run / "config.yaml").read_text() and "model:" in lines[0]


def test_train_and_eval_as_functions(rel_dataset, tmp_path):
    res = train(TrainRequest(config="tiny", data=rel_dataset, run_dir=tmp_path / "run", max_steps=3,
                             overrides=["train.eval_interval=3"]))
    assert res.exit_code == 0 and not res.warnings and Path(res.summary["run_dir"]) == tmp_path / "run"
    out = evaluate(EvalRequest(run=tmp_path / "run", split="train", samples=False, json=tmp_path / "e.json",
                               device="cpu"))
    assert out.lines[-1] == f"wrote {tmp_path / 'e.json'}"
    assert json.loads((tmp_path / "e.json").read_text()) == out.numbers


def test_train_refuses_resume_with_init_or_force(tmp_path):
    with pytest.raises(GuitarformerError, match="--init starts a new run"):
        train(TrainRequest(resume=tmp_path, init="pretrained"))
    with pytest.raises(GuitarformerError, match="--force starts a run afresh"):
        train(TrainRequest(resume=tmp_path, force=True))


def test_eval_fingering_as_a_function(rel_run, tmp_path):
    out = evaluate(EvalRequest(run=rel_run, fingering=FIXTURES / "tabs", json=tmp_path / "f.json", device="cpu"))
    assert out.numbers["pooled"]["notes"] > 0 and out.lines[-1] == f"wrote {tmp_path / 'f.json'}"
