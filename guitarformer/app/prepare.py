"""`prepare` and `info`: files tokenized into a dataset folder (or as a run did, `like`), and a summary of one."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guitarformer.app.requests import InfoRequest, PrepareRequest, Say, Voice
from guitarformer.errors import GuitarformerError
from guitarformer.runs.rundir import RunDir


@dataclass
class PrepareResult:
    path: Path  # the dataset folder
    meta: dict[str, Any]  # its meta.json
    lines: list[str] = field(default_factory=list)  # the summary and where it was written
    warnings: list[str] = field(default_factory=list)


@dataclass
class InfoResult:
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def find_dataset(value: Path | None) -> Path | None:
    """A dataset folder, or the bare name of one that is not a folder here: a dataset `prepare` wrote under
    data/prepared (its default out) or into the cache (the built-in corpus's, e.g. builtin-tabremi-...)."""
    if value is None or value.exists() or len(value.parts) != 1:
        return value
    from guitarformer.data.corpus import default_dataset_dir

    for home in (Path("data") / "prepared", default_dataset_dir().parent):
        if (home / value).is_dir():
            return (home / value).resolve()
    return value


def _data_config(req: PrepareRequest):
    """The data section the files are tokenized with, and the tokenizer of the run `like` names (else None)."""
    from guitarformer.config import load_config, set_values

    cfg = load_config(req.config, list(req.overrides))
    cfg = set_values(cfg, {k: v for k, v in (("data.tokenizer", req.tokenizer), ("data.bpe_vocab_size", req.bpe_vocab))
                           if v is not None})
    if req.like is None:
        return cfg.data, None
    if req.config or req.tokenizer or req.bpe_vocab is not None or req.overrides or not req.inputs:
        raise GuitarformerError("--like takes every token setting from the run it names",
                                "pass your files and --like RUN without --config, --tokenizer, --bpe or --set")
    from guitarformer.training.init import load_init

    init = load_init(req.like)
    data = init.cfg.data
    data.dataset = None
    return data, init.tokenizer


def prepare(req: PrepareRequest, say: Say | None = None) -> PrepareResult:
    """Tokenize `req.inputs` (or the built-in corpus) into a dataset folder; the summary lines are said before an
    error for a set of files none of which gave usable guitar music."""
    from guitarformer.data.prepare import load_meta, summary_lines

    voice = Voice(say)
    data, like_tok = _data_config(req)
    if not req.inputs:
        from guitarformer.data.corpus import ensure_builtin_dataset

        path = ensure_builtin_dataset(data, out=req.out, progress=req.progress)
        meta = load_meta(path)
    else:
        from guitarformer.data.prepare import PrepareOptions, suggested_out
        from guitarformer.data.prepare import prepare as run_prepare

        path = req.out if req.out is not None else suggested_out(req.inputs[0])
        options = PrepareOptions(tracks=req.tracks, include_bass=req.include_bass, workers=req.workers,
                                 progress=req.progress, force=req.force)
        meta = run_prepare(list(req.inputs), path, data, options, like=like_tok)
    for line in summary_lines(meta):
        voice(line)
    if meta["status"].get("ok", 0) == 0:
        from guitarformer.data.prepare import readable_types

        raise GuitarformerError(f"none of the {meta['files']} input files gave usable guitar music "
                                f"(reasons in {path / 'manifest.jsonl'})",
                                f"pass files with a guitar part: {readable_types()}")
    init_flag = f" --init {req.like}" if req.like is not None else ""
    voice(f"wrote {path}  (next: guitarformer train --data {path}{init_flag})")
    return PrepareResult(path, meta, voice.lines, voice.warnings)


def info(req: InfoRequest, say: Say | None = None) -> InfoResult:
    """A prepared dataset's summary (files, tokens, vocabulary, counts by format and status), or a run folder's
    config and summary.json."""
    from guitarformer.data.prepare import load_meta, summary_lines

    voice = Voice(say)
    dataset = find_dataset(req.dataset)
    if dataset is None:
        from guitarformer.data.corpus import default_dataset_dir

        cands = sorted(default_dataset_dir().parent.glob("builtin-*"))
        if not cands:
            raise GuitarformerError("no dataset given and the built-in corpus is not prepared yet",
                                    "pass a dataset folder, or run `guitarformer prepare`")
        dataset = max(cands, key=lambda d: d.stat().st_mtime)  # the most recently prepared
    run = RunDir(dataset)
    if run.is_run():
        summ = run.summary_path
        voice(run.config_path.read_text())
        if summ.is_file():
            voice(json.dumps(json.loads(summ.read_text()), indent=2))
    else:
        for line in summary_lines(load_meta(dataset)):
            voice(line)
    return InfoResult(voice.lines, voice.warnings)
