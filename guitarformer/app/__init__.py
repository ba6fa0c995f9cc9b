"""The commands as functions over requests: `sample`, `infill`, `tab`. The CLI parses its options into a request
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
    "InfillRequest": "guitarformer.app.requests",
    "Outputs": "guitarformer.app.requests",
    "SampleRequest": "guitarformer.app.requests",
    "TabRequest": "guitarformer.app.requests",
    "SampleResult": "guitarformer.app.sample",
    "check_sample_request": "guitarformer.app.sample",
    "read_sample_prompt": "guitarformer.app.sample",
    "sample": "guitarformer.app.sample",
    "warm_up": "guitarformer.app.sample",
    "TabResult": "guitarformer.app.tab",
    "tab": "guitarformer.app.tab",
    "Riff": "guitarformer.generation.riffs",
}

__all__ = sorted(_API)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from guitarformer.app.files import read_user_file, read_user_parts, write_score
    from guitarformer.app.infill import InfillResult, infill
    from guitarformer.app.loaded import OptionInfo, RunInfo, plain_words, run_info
    from guitarformer.app.requests import InfillRequest, Outputs, SampleRequest, TabRequest
    from guitarformer.app.sample import SampleResult, check_sample_request, read_sample_prompt, sample, warm_up
    from guitarformer.app.tab import TabResult, tab
    from guitarformer.generation.riffs import Riff
    from guitarformer.runs import Run, load_run


__getattr__ = lazy_names(__name__, _API, globals())


def __dir__() -> list[str]:
    return __all__
