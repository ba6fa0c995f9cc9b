"""The commands as functions over requests: `prepare`, `info`, `train`, `evaluate` (eval), `sample`, `infill`,
`tab`. The CLI parses its options into a request
and calls one of these; the studio's JSON API and the Python API call the same functions, with the same checks and
errors. A `Run` (load_run) can be passed to every call so that a run's weights are read once.

    from guitarformer.app import Outputs, SampleRequest, load_run, sample

    run = load_run("runs/20261122-101500")
    result = sample(SampleRequest.of(bars=8, seed=3, key="E:minor", outputs=Outputs(midi="riff.mid")), run)
    print("\\n".join(result.lines))

Each name is imported on first use (as the package root does), so a command imports only what it runs: `tab` of a
file that keeps its own fingering never loads torch or the tokenizers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guitarformer import lazy_names

_API = {
    "EvalResult": "guitarformer.app.eval",
    "evaluate": "guitarformer.app.eval",
    "read_user_file": "guitarformer.app.files",
    "read_user_parts": "guitarformer.app.files",
    "write_score": "guitarformer.app.files",
    "InfillResult": "guitarformer.app.infill",
    "infill": "guitarformer.app.infill",
    "Run": "guitarformer.runs",
    "OptionInfo": "guitarformer.app.loaded",
    "RunInfo": "guitarformer.app.loaded",
    "load_run": "guitarformer.runs",
    "plain_words": "guitarformer.app.loaded",
    "run_info": "guitarformer.app.loaded",
    "InfoResult": "guitarformer.app.prepare",
    "PrepareResult": "guitarformer.app.prepare",
    "find_dataset": "guitarformer.app.prepare",
    "info": "guitarformer.app.prepare",
    "prepare": "guitarformer.app.prepare",
    "EvalRequest": "guitarformer.app.requests",
    "InfillRequest": "guitarformer.app.requests",
    "InfoRequest": "guitarformer.app.requests",
    "Outputs": "guitarformer.app.requests",
    "PrepareRequest": "guitarformer.app.requests",
    "SampleRequest": "guitarformer.app.requests",
    "TabRequest": "guitarformer.app.requests",
    "TrainRequest": "guitarformer.app.requests",
    "SampleResult": "guitarformer.app.sample",
    "check_sample_request": "guitarformer.app.sample",
    "read_sample_prompt": "guitarformer.app.sample",
    "sample": "guitarformer.app.sample",
    "warm_up": "guitarformer.app.sample",
    "TabResult": "guitarformer.app.tab",
    "tab": "guitarformer.app.tab",
    "TrainResult": "guitarformer.app.train",
    "train": "guitarformer.app.train",
    "Riff": "guitarformer.compose.riffs",
}

__all__ = sorted(_API)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from guitarformer.app.eval import EvalResult, evaluate
    from guitarformer.app.files import read_user_file, read_user_parts, write_score
    from guitarformer.app.infill import InfillResult, infill
    from guitarformer.app.loaded import OptionInfo, RunInfo, plain_words, run_info
    from guitarformer.app.prepare import InfoResult, PrepareResult, find_dataset, info, prepare
    from guitarformer.app.requests import (EvalRequest, InfillRequest, InfoRequest, Outputs, PrepareRequest,
                                           SampleRequest, TabRequest, TrainRequest)
    from guitarformer.app.sample import SampleResult, check_sample_request, read_sample_prompt, sample, warm_up
    from guitarformer.app.tab import TabResult, tab
    from guitarformer.app.train import TrainResult, train
    from guitarformer.compose.riffs import Riff
    from guitarformer.runs import Run, load_run


__getattr__ = lazy_names(__name__, _API, globals())


def __dir__() -> list[str]:
    return __all__
