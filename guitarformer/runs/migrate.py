"""One versioned migration of what older run folders saved, to what this version reads.

A run folder records its format in state.json (runs/rundir.py `RUN_FORMAT`); a folder without one is format 1: the
shipped model, and runs saved by earlier releases. Their configs leave out the settings added since, and a missing
key would otherwise take today's preset (a run resumed from before the plain share would start training with one,
a model saved before `prev_token` would be built with a table it has no weights for). `migrate` fills what such a
run did, and moves what the run decided for itself (`budget_fitted`) out of its config into its state.
"""

from __future__ import annotations

import copy
from typing import Any

from guitarformer.config import Config, REMOVED, from_dict
from guitarformer.vocab.tab_tokens import tab_layout_of
from guitarformer.runs.rundir import RUN_FORMAT, RunDir, RunState

# Format 1: the settings added after runs were saved without them, and the value that says what such a run did.
FORMAT_1_DID = {("data", "control_plain"): 0.0, ("data", "control_targets"): True, ("data", "piece_starts"): 0.0,
                ("sample", "time_signature"): None, ("model", "prev_token"): False, ("model", "copy"): False}


def migrate(saved: dict[str, Any], version: int, tab_layout: int | None = None) -> dict[str, Any]:
    """`saved` ({"config": the run's saved config dict, "state": its RunState fields}) of a run of format
    `version`, as this version's format writes it. `tab_layout`: the layout its tokenizer.json says (format 1
    configs may predate data.tab_layout; None: not at hand)."""
    out = {"config": copy.deepcopy(saved.get("config") or {}), "state": dict(saved.get("state") or {})}
    for (section, key) in REMOVED:  # a setting since taken out: the run still loads (config.REMOVED says why)
        if isinstance(out["config"].get(section), dict):
            out["config"][section].pop(key, None)
    if version < 2:
        cfg = out["config"]
        for (section, key), then in FORMAT_1_DID.items():
            cfg.setdefault(section, {}).setdefault(key, then)
        if tab_layout is not None:
            cfg["data"]["tab_layout"] = tab_layout
        fitted = cfg.get("train", {}).pop("budget_fitted", None)
        if fitted is not None:
            out["state"].setdefault("budget_fitted", bool(fitted))
    out["state"]["format"] = RUN_FORMAT
    return out


def read_saved(config: dict[str, Any], run: RunDir, tokenizer=None) -> tuple[Config, RunState]:
    """The config and state of `run` from its saved config dict (a checkpoint's or config.yaml's), migrated from the
    format its folder records; `tokenizer`: its tokenizer where loaded (a format-1 run's tab layout)."""
    state = run.read_state()
    layout = None if tokenizer is None else tab_layout_of(tokenizer, None)
    fields = {} if state.format < 2 else {"budget_fitted": state.budget_fitted}
    saved = migrate({"config": config, "state": fields}, state.format, layout)
    return from_dict(saved["config"]), RunState(**saved["state"])
