"""Runs: a run folder and its files (rundir.py: RunDir, the newest run, what `--run` names), a run loaded (run.py:
Run, load_run), its checkpoints (checkpoint.py), the migration of older run folders (migrate.py) and the export of
a run as the shipped model (export.py)."""

from __future__ import annotations

from guitarformer.runs.rundir import (
    PRETRAINED,
    RunDir,
    checkpoint_of,
    default_run,
    has_pretrained,
    named_checkpoint,
    new_run_dir,
    newest_run,
)
from guitarformer.runs.run import Run, load_run, read_run

__all__ = ["PRETRAINED", "Run", "RunDir", "checkpoint_of", "default_run", "has_pretrained", "load_run",
           "named_checkpoint", "new_run_dir", "newest_run", "read_run"]
