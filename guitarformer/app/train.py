"""`train`: a run trained from a config, continued (`resume`) or fine-tuned from another run's weights (`init`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from guitarformer.app.requests import Say, TrainRequest, Voice
from guitarformer.errors import GuitarformerError


@dataclass
class TrainResult:
    summary: dict[str, Any]  # the run's summary (run_dir, steps, losses; `interrupted` and `stopped_by` when stopped)
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # how to resume a run that was stopped

    @property
    def exit_code(self) -> int:
        """0 for a run that finished; 130 (SIGINT) or 143 (another signal) for one stopped and checkpointed, so that
        a scheduler can tell the two apart."""
        if not self.summary.get("interrupted"):
            return 0
        return 130 if "SIGINT" in self.summary["stopped_by"] else 143


def _asked(req: TrainRequest) -> dict[str, Any]:
    """The request's typed settings as config keys, set after the YAML overrides and validated with them (a folder
    named `null` or `1e3` stays a folder name)."""
    return {k: v for k, v in (("model.kind", req.model_kind and req.model_kind.replace("-", "_")),
                              ("data.dataset", req.data and str(req.data)), ("train.max_steps", req.max_steps),
                              ("train.device", req.device), ("train.num_threads", req.threads or None),
                              ("train.init", req.init)) if v is not None}


def _config(req: TrainRequest, asked: dict[str, Any]):
    """The config a new run trains with: the named one (encdec-small for an encoder-decoder named alone), the
    overrides, the asked settings and, for a fine-tune without a config, the fine-tune recipe's lr and steps."""
    from guitarformer.config import load_config, set_values

    name = req.config
    if name is None and req.model_kind == "encoder-decoder":
        name = "encdec-small"
    cfg = set_values(load_config(name, list(req.overrides)), asked)  # errors surface before torch loads
    if req.init is not None and name is None:  # the preset's lr and steps are for random weights
        from guitarformer.training.init import finetune_defaults

        cfg = finetune_defaults(cfg, set(asked) | {o.partition("=")[0].strip() for o in req.overrides})
    return cfg


def train(req: TrainRequest, say: Say | None = None) -> TrainResult:
    """Train (or resume, or fine-tune) a run; its checkpoints and logs go to its run folder. A run stopped by a
    signal is checkpointed and says how to resume it (`TrainResult.exit_code`)."""
    voice = Voice(say)
    asked = _asked(req)
    if req.resume is not None and req.init is not None:
        raise GuitarformerError("--init starts a new run from another's weights but --resume continues a run",
                                f"drop --init to continue {req.resume} (a fine-tune resumes as any run)")
    if req.resume is not None:
        if req.force:
            raise GuitarformerError("--force starts a run afresh but --resume continues one",
                                    f"drop --force to continue {req.resume}, or drop --resume to start over there")
        from guitarformer.config import Config
        from guitarformer.training.loop import train as run_train

        flags = list(req.overrides) + [f"{k}={v}" for k, v in asked.items() if k != "model.kind"]
        summary = run_train(Config(), resume=req.resume, progress=req.progress, resume_overrides=flags)
    else:
        cfg = _config(req, asked)
        from guitarformer.training.loop import train as run_train

        summary = run_train(cfg, run_dir=req.run_dir, progress=req.progress, force=req.force)
    from guitarformer.runtime import teardown_distributed

    teardown_distributed()  # torchrun's ranks: leave the process group before the interpreter exits
    if summary.get("interrupted"):  # checkpoint saved; a scheduler can tell this from a finished run
        voice(f"interrupted ({summary['stopped_by']}); resume with: guitarformer train --resume {summary['run_dir']}",
              True)
    return TrainResult(summary, voice.lines, voice.warnings)
