"""The shipped model: a run directory inside the package, used when the user names no run and has none of their own.

It is laid out as any run (runs/rundir.py names its files), so `runs.load_run` reads it as it reads the user's
runs, plus a model card (data, recipe, steps, scores), the control values its training data held (data/seen.py:
what `sample` may ask it for) and the forms of its training tunes (generation/form.py: the forms `sample --form
auto` draws). `scripts/release_model.py` trains it on the built-in public-domain corpus and writes it here with
`runs.export.export_run`; the weights are stored in half precision where full precision would pass `MAX_BYTES`,
and load with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from pathlib import Path

MAX_BYTES = 10 * 1024 * 1024  # what a pip install may carry


def pretrained_dir() -> Path:
    """The folder of the shipped model inside the installed package."""
    return Path(__file__).resolve().parent


def band_dir() -> Path:
    """The folder of the shipped band model (guitar, bass and drums: docs/band.md), laid out as the shipped model's."""
    return pretrained_dir() / "band"
