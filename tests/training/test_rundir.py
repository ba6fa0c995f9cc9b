"""RunDir is the one place that spells a run folder's file names; `sample` refuses what a run never learned before
its weights load."""

import re
from pathlib import Path

import pytest

from guitarformer.app import SampleRequest, sample
from guitarformer.errors import GuitarformerError
from guitarformer.runs import RunDir, read_run
from guitarformer.runs.rundir import has_pretrained

PKG = Path(__file__).resolve().parents[2] / "guitarformer"
RUN_FILES = re.compile(r'"(best|last)\.pt"|"config\.yaml"|"summary\.json"|"metrics\.jsonl"|"init\.json"|"state\.json"'
                       r'|"MODEL_CARD\.md"|"ckpt"|"tb"')


def test_only_runs_spells_a_run_files_name():
    spelled = [f"{p.relative_to(PKG)}:{i}" for p in PKG.rglob("*.py") if p.parent.name != "runs"
               for i, line in enumerate(p.read_text().splitlines(), 1) if RUN_FILES.search(line)]
    assert spelled == []


def test_a_run_dir_names_its_files(tmp_path):
    rd = RunDir(tmp_path)
    assert rd.checkpoint("best") == tmp_path / "ckpt" / "best.pt" and rd.config_path.name == "config.yaml"
    assert RunDir.of_checkpoint(rd.checkpoint("last")).path == tmp_path and rd.read_state().format == 1
    with pytest.raises(GuitarformerError, match="no checkpoint"):
        rd.best_checkpoint()


@pytest.mark.skipif(not has_pretrained(), reason="no shipped model in this checkout")
def test_a_style_the_run_never_learned_is_refused_before_its_weights_load():
    run = read_run("pretrained")
    with pytest.raises(GuitarformerError, match="metal"):
        sample(SampleRequest.of(style="metal", bars=2), run)
    assert run.model is None  # refused from its files alone
