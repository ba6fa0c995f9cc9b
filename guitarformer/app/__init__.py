"""The commands as functions over requests: `sample`, `infill`, `tab`. The CLI parses its options into a request
and calls one of these; the studio's JSON API and the Python API call the same functions, with the same checks and
errors. A `LoadedRun` (load_run_once) can be passed to every call so that a run's weights are read once.

    from guitarformer.app import Outputs, SampleRequest, load_run_once, sample

    run = load_run_once("runs/20261122-101500")
    result = sample(SampleRequest(bars=8, seed=3, key="E:minor", outputs=Outputs(midi="riff.mid")), run)
    print("\\n".join(result.lines))
"""

from guitarformer.app.files import read_user_file, read_user_parts, write_score
from guitarformer.app.infill import InfillResult, infill
from guitarformer.app.loaded import LoadedRun, OptionInfo, RunInfo, load_run_once, run_info
from guitarformer.app.requests import InfillRequest, Outputs, SampleRequest, TabRequest
from guitarformer.app.sample import SampleResult, check_sample_request, read_sample_prompt, sample, warm_up
from guitarformer.app.tab import TabResult, tab
from guitarformer.generation.riffs import Riff

__all__ = ["InfillRequest", "InfillResult", "LoadedRun", "OptionInfo", "Outputs", "Riff", "RunInfo", "SampleRequest",
           "SampleResult", "TabRequest", "TabResult", "check_sample_request", "infill", "load_run_once",
           "read_sample_prompt", "read_user_file", "read_user_parts", "run_info", "sample", "tab", "warm_up",
           "write_score"]
