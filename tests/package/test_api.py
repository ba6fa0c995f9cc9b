"""The public API (guitarformer/__init__.py) and what a wheel ships."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import guitarformer as gf

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"


def test_every_public_name_resolves_and_is_documented():
    for name in gf.__all__:
        obj = getattr(gf, name)
        if callable(obj) and name not in ("IGNORE_INDEX",):
            assert obj.__doc__, f"guitarformer.{name} has no docstring"
    with pytest.raises(AttributeError):
        gf.no_such_thing  # noqa: B018


def test_import_is_cheap():
    """`import guitarformer` (and so the CLI's start-up) does not pull in torch."""
    code = "import sys, guitarformer; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_read_fret_write_round_trip(tmp_path):
    (gs,) = gf.read_guitar(FIX / "io" / "drop_d_capo.gp5")
    frets = gf.fret(gs.track.notes, gs.tuning, gs.capo)
    assert len(frets) == len(gs.track.notes)
    gf.write_ascii_tab(gs, tmp_path / "t.txt")
    gf.write_gp5(gs, tmp_path / "t.gp5")
    (again,) = gf.read_guitar(gf.write_midi(gs, tmp_path / "t.mid"))
    assert [(n.time, n.pitch) for n in again.track.notes] == [(n.time, n.pitch) for n in gs.track.notes]
    assert (tmp_path / "t.txt").read_text().strip() and (tmp_path / "t.gp5").stat().st_size > 0


def test_build_and_generate():
    cfg = gf.load_config("tiny")
    cfg.model.vocab_size = 50
    torch.manual_seed(0)
    model = gf.build_model(cfg.model)
    out = gf.generate(model, [[1, 5, 7]], gf.SamplingParams(max_new_tokens=5), generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 8) and out[0, :3].tolist() == [1, 5, 7]


def _package_data() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]


def test_package_data_exists_and_is_tracked():
    """Every file a wheel ships as package data is in the tree and in git (an ignored file would be missing
    from a clean clone: the string model's weights once were)."""
    tracked = None
    if (ROOT / ".git").exists():
        r = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
        tracked = set(r.stdout.split()) if r.returncode == 0 else None
    for pkg, patterns in _package_data().items():
        base = ROOT / pkg.replace(".", "/")
        for pattern in patterns:
            files = sorted(base.glob(pattern))
            assert files, f"package data {pkg}:{pattern} matches nothing"
            for f in files:
                if tracked is not None:
                    assert f.relative_to(ROOT).as_posix() in tracked, f"{f} is shipped but not in git"


def test_named_configs_ship_inside_the_package():
    from guitarformer.config import PACKAGE_CONFIG_DIR, resolve_config_path

    names = {p.stem for p in PACKAGE_CONFIG_DIR.glob("*.yaml")}
    assert {"tiny", "decoder-small", "decoder-base", "encdec-small", "encdec-base"} <= names
    assert resolve_config_path("decoder-small").resolve().parent == PACKAGE_CONFIG_DIR.resolve()


@pytest.mark.slow
def test_a_command_is_its_function_whichever_import_comes_first():
    """guitarformer.app imports its names on first use; `sample`, `tab` and `infill` are also its submodules' names, and
    importing a submodule first (`from guitarformer.app.sample import ...`) must not leave the module where the
    function is exported."""
    code = ("import guitarformer.app.sample, guitarformer.app.tab, guitarformer.app.infill\n"
            "from guitarformer.app import infill, sample, tab\n"
            "import guitarformer\n"
            "print(all(callable(f) for f in (infill, sample, tab, guitarformer.sample, guitarformer.tab)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
