"""The shipped model: a run directory inside the package, used when the user names no run and has none of their own.

It is laid out as any run (``ckpt/best.pt``, ``config.yaml``, ``tokenizer.json``), so `runs.load_run` reads it
as it reads the user's runs, plus ``MODEL_CARD.md`` (data, recipe, steps, scores) and ``controls_seen.json`` (the
control values its training data held, vocab/seen.py: what `sample` may ask it for) and ``forms_seen.json`` (which
bars of its training tunes repeat which, compose/form.py: the forms `sample --form auto` draws). `tools/release_model.py`
trains it on the built-in public-domain corpus and writes it here with `runs.export.export_run`; the weights
are stored in half precision where full precision would pass `MAX_BYTES`, and load with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from pathlib import Path

CHECKPOINT = Path("ckpt") / "best.pt"
FILES = (CHECKPOINT, Path("config.yaml"), Path("tokenizer.json"), Path("MODEL_CARD.md"))
MAX_BYTES = 10 * 1024 * 1024  # what a pip install may carry
SHIPPED_NOTE = "using the shipped model (no --run given and no run under {base}/): see {card}"


def pretrained_dir() -> Path:
    """The folder of the shipped model inside the installed package."""
    return Path(__file__).resolve().parent


def band_dir() -> Path:
    """The folder of the shipped band model (guitar, bass and drums: docs/band.md), laid out as the shipped model's."""
    return pretrained_dir() / "band"


def has_pretrained(folder: Path | None = None) -> bool:
    """Whether the shipped model is there, every file of it (a source checkout before a release has none)."""
    folder = pretrained_dir() if folder is None else Path(folder)
    return all((folder / f).is_file() for f in FILES)


def shipped_note(base: str | Path = "runs", named: bool = False) -> str:
    """The one line a command prints when it falls back to the shipped model, or (`named`) was asked for it."""
    if named:
        return f"using the shipped model: see {pretrained_dir() / 'MODEL_CARD.md'}"
    return SHIPPED_NOTE.format(base=Path(base), card=pretrained_dir() / "MODEL_CARD.md")
