"""The commands' outputs are byte for byte those recorded before they moved into guitarformer/app (fixed untrained
runs and seeds; tests/helpers/app_golden.py says which changes were made on purpose and how those files are compared)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _golden_module():
    spec = importlib.util.spec_from_file_location("app_golden", ROOT / "tests" / "helpers" / "app_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sample_tab_and_infill_outputs_are_unchanged(tmp_path):
    golden = _golden_module()
    want = json.loads((ROOT / "tests" / "golden" / "app_outputs.json").read_text())
    got = golden.run_all(tmp_path)
    assert set(got) == set(want)
    assert golden.compare(want, got) == []
