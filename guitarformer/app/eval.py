"""`eval`: is this model any good? Likelihood against a Kneser-Ney n-gram, music metrics against real music,
playability; or (`fingering`) only how often the model fingers human tabs as their authors did."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guitarformer.app.requests import EvalRequest, Say, Voice


@dataclass
class EvalResult:
    numbers: dict[str, Any]  # every number (as --json writes them)
    lines: list[str] = field(default_factory=list)  # the table, and where the numbers were written
    warnings: list[str] = field(default_factory=list)


def _write_json(path: Path, numbers: dict[str, Any], voice: Voice) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(numbers, indent=2, allow_nan=False))
    voice(f"wrote {path}")


def _fingering(req: EvalRequest, voice: Voice) -> EvalResult:
    """The agreement of a TabREMI decoder's fingering with the tabs under `req.fingering`, per folder and pooled."""
    from guitarformer.fingering.agreement import evaluate_folder, format_report
    from guitarformer.fingering.tab_model import check_fingering_run
    from guitarformer.runs import load_run
    from guitarformer.runtime import resolve_device, set_threads, step_work

    dev = resolve_device(req.device)
    loaded = load_run(req.run, None, str(dev))
    model, tokenizer = loaded.model, loaded.tokenizer
    check_fingering_run(model, tokenizer)
    set_threads(req.threads, step_work(model, req.batch_size))
    report = evaluate_folder(model, tokenizer, req.fingering, dev, req.batch_size)
    voice(format_report(report))
    numbers = report.as_dict()
    if req.json:
        _write_json(req.json, numbers, voice)
    return EvalResult(numbers, voice.lines, voice.warnings)


def evaluate(req: EvalRequest, say: Say | None = None) -> EvalResult:
    """Evaluate a run (its numbers also go to its TensorBoard under eval/<split>/); with `req.progress` each stage is
    said as a warning line ("eval: ...") as it starts."""
    voice = Voice(say)
    if req.fingering is not None:
        return _fingering(req, voice)
    from guitarformer.evaluation.report import EvalOptions, evaluate_run, format_table, jsonable, log_tensorboard

    options = EvalOptions(split=req.split, device=req.device, threads=req.threads, ngram_order=req.ngram_order,
                          cont_src=req.cont_src, cont_tgt=req.cont_tgt, samples=req.samples,
                          num_samples=req.num_samples, max_new_tokens=req.max_new_tokens, reference=req.reference,
                          seed=req.seed)
    res = evaluate_run(req.run, req.data, options,
                       progress=(lambda s: voice(f"eval: {s}", True)) if req.progress else None)
    voice(format_table(res))
    if not log_tensorboard(Path(res["run"]), res):
        voice("eval: the shipped model's folder is part of the package: nothing logged to TensorBoard "
              "(--json FILE keeps every number)", True)
    numbers = jsonable(res)
    if req.json:
        _write_json(req.json, numbers, voice)
    return EvalResult(numbers, voice.lines, voice.warnings)
