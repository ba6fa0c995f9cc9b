"""`tab`: a playable tab of any readable file, printed or written as ASCII tab / Guitar Pro 5. A file's own
fingering is kept unless a tuning, position or program asks for another, or a tab-token run fingers it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from guitarformer.app.files import pick_track, read_user_parts, stringed
from guitarformer.app.requests import TabRequest, check_outputs
from guitarformer.errors import GuitarformerError
from guitarformer.fingering import finger_score
from guitarformer.music.bars import count_bars
from guitarformer.music.guitar import parse_tuning
from guitarformer.music.score import GuitarScore
from guitarformer.pretrained import pretrained_dir
from guitarformer.render.ascii_tab import describe_unplaced, render_ascii_tab, unplaced_notes
from guitarformer.render.gp5 import write_gp5_parts

if TYPE_CHECKING:  # a run (torch, the models) is loaded only for --run: `tab song.gp5` imports neither
    from guitarformer.runs.run import Run


@dataclass
class TabResult:
    text: str  # the ASCII tab of every part ("" when only a Guitar Pro file was asked for)
    parts: list[GuitarScore]  # the parts shown, each with the frets the tab uses
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # notes the tuning cannot hold, per part
    notes: list[str] = field(default_factory=list)  # what the user should know of the fingering asked for


# A model that learned its strings from fret()'s fingering can only imitate it: on held-out human tabs it matches
# their authors less often than fret() does (benchmarks/bench_fingering.py; docs/results/FINGERING_MODEL.md).
FRET_TAUGHT = ("{who} learned its strings from fret()'s fingering ({data}), so it fingers like fret() at "
               "best: on held-out human tabs the shipped model matches fewer notes as their authors played them "
               "than fret() does (docs/results/FINGERING_MODEL.md). Without --run, tab fingers with fret() (or keeps "
               "the file's own).")


def strings_taught_by(cfg) -> str | None:
    """Where a run's training strings came from: "fret()" for the built-in corpus (MIDI and ABC, fingered by fret())
    or a dataset none of whose files kept its own fingering (its manifest.jsonl says, file by file), "people" where
    some did, None where the dataset's manifest is not at hand."""
    if not cfg.data.dataset:
        return "fret()"
    manifest = Path(cfg.data.dataset).expanduser() / "manifest.jsonl"
    try:
        records = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    own = any(r.get("status") == "ok" and str(r.get("fingering", "")).startswith("source") for r in records)
    return "people" if own else "fret()"


def _fret_taught_note(loaded: Run) -> list[str]:
    """One line for a run whose model only ever saw fret()'s strings (see FRET_TAUGHT), else none."""
    if strings_taught_by(loaded.cfg) != "fret()":
        return []
    who = "The shipped model" if loaded.run_dir.resolve() == pretrained_dir() else \
        f"The model of {loaded.run_dir.name}"
    data = "the built-in corpus: no human tab" if not loaded.cfg.data.dataset else \
        "its dataset's files had no fingering of their own"
    return [FRET_TAUGHT.format(who=who, data=data)]


def _fingered_by_model(req: TabRequest, parts: list[GuitarScore],
                       loaded: Run | None) -> tuple[list[list] | None, list[str]]:
    """Each part's frets as a tab-token run fingers them, when the request names a run (or one is given; else None),
    and what the user should know of that run's fingering (`_fret_taught_note`)."""
    if loaded is None and req.run is None and req.checkpoint is None:
        return None, []
    if req.position is not None or req.program is not None:
        raise GuitarformerError("--position and --program choose how fret() fingers; with --run the model does",
                                "drop --run to re-finger with fret(), or drop --position/--program")
    from guitarformer.runs.run import load_run
    from guitarformer.fingering.tab_model import check_fingering_run, finger
    from guitarformer.runtime import set_threads, step_work

    loaded = loaded or load_run(req.run, req.checkpoint, req.device)
    set_threads(req.threads, step_work(loaded.model, 1))
    check_fingering_run(loaded.model, loaded.tokenizer)
    return [f.frets for f in finger(loaded.model, loaded.tokenizer, parts, loaded.device)], _fret_taught_note(loaded)


def _fingered(req: TabRequest, parts: list[GuitarScore],
              loaded: Run | None) -> tuple[list[GuitarScore], list[str]]:
    """The parts with the frets the tab shows (gs.frets): the file's own, fret()'s, or the run's; and notes on the
    run's fingering."""
    new_tuning = parse_tuning(req.tuning) if isinstance(req.tuning, str) else \
        (tuple(req.tuning) if req.tuning else None)
    for gs in parts:
        if new_tuning:
            gs.tuning = new_tuning
    by_model, notes = _fingered_by_model(req, parts, loaded)
    for k, gs in enumerate(parts):
        keep = gs.frets and not new_tuning and req.position is None and req.program is None
        if by_model is not None:
            gs.frets = by_model[k]
        elif not keep:  # the part keeps its own program; `program` only says how to finger it
            gs.frets = finger_score(gs, req.position, req.program).frets
        if req.bars:
            n_bars = count_bars(gs.score.time_signatures, gs.score.ticks_per_quarter,
                                max((x.time + 1 for x in gs.track.notes), default=1))
            if req.bars[0] > n_bars:
                raise GuitarformerError(f"--bars {req.bars[0]}-{req.bars[1]}: {gs.name or Path(req.file).name} "
                                        f"has {n_bars} bars", f"pass bars between 1 and {n_bars}")
    return parts, notes


def tab(req: TabRequest, loaded: Run | None = None) -> TabResult:
    """The `tab` command: read the file's parts (or the one `track` names), finger them, render the tab and write
    the outputs asked for; `loaded`: a tab-token run that fingers the notes instead of fret()."""
    check_outputs(req.outputs, ("tab", "gp"))
    parts = stringed(read_user_parts(req.file, req.tracks), req.file)  # a tab has strings: drums are not tabbed
    if req.track is not None:
        parts = [pick_track(parts, req.track, req.file, req.tracks)]
    parts, notes = _fingered(req, parts, loaded)
    result = TabResult("", parts, notes=notes)
    lo, hi = req.bars or (1, 10**9)
    left_out = None
    if req.outputs.gp is not None:
        req.outputs.gp.parent.mkdir(parents=True, exist_ok=True)
        left_out = write_gp5_parts([(gs, gs.frets) for gs in parts], req.outputs.gp, bars=req.bars)
        result.files["gp"] = req.outputs.gp
    if req.outputs.tab is not None or left_out is None:
        result.text = "\n".join(render_ascii_tab(gs, gs.frets, width=req.width, bars=req.bars) for gs in parts)
        left_out = [[u for u in unplaced_notes(gs, gs.frets) if lo <= u.bar <= hi] for gs in parts]
    if req.outputs.tab is not None:
        req.outputs.tab.parent.mkdir(parents=True, exist_ok=True)
        req.outputs.tab.write_text(result.text, encoding="utf-8")
        result.files["tab"] = req.outputs.tab
    for gs, missing in zip(parts, left_out):
        if missing:
            where = f"{gs.name}: " if len(parts) > 1 and gs.name else ""
            result.warnings.append(f"{where}{describe_unplaced(missing, gs.tuning, gs.capo)}")
    return result
