"""What the page (or a script) sends, checked and turned into the app's requests; what a riff looks like back.

JSON option names are `run_info`'s option names (bars, tempo, time_signature, tuning, the registered controls' options
of vocab/controls.py: key, style, density, ..., then form, program, temperature, top_p, seed; and guard), so the page
builds its form from /api/run (`form_fields`, in order) and sends the fields back as they are. An option this run
cannot honour is refused here with the run's own reason, before the request waits in the queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from guitarformer.app import RunInfo
from guitarformer.vocab.controls import BAR, option_controls
from guitarformer.errors import GuitarformerError
from guitarformer.music.bars import count_bars
from guitarformer.music.score import GuitarScore

MAX_CANDIDATES = 8  # riffs one Generate asks for: enough to flip through, short enough to wait for
MAX_BARS = 64
# The form's fields around the controls': (name, label, input kind "int" | "float" | "text").
BEFORE_CONTROLS = (("parts", "Parts (guitar,bass,drums)", "text"), ("bars", "Bars", "int"), ("tempo", "Tempo (BPM)", "float"),
                   ("time_signature", "Time signature", "text"), ("tuning", "Tuning", "text"))
AFTER_CONTROLS = (("form", "Form (auto, none, AABB)", "text"), ("program", "GM program", "int"),
                  ("temperature", "Temperature", "float"), ("top_p", "Top-p", "float"), ("seed", "Seed", "int"))
BOOL_OPTIONS = {"guard"}  # the sampler's guards (generation/constraint/guards.py), on unless false
FIX = "see /api/run for the options this run honours and their values (docs/studio.md)"


def form_fields() -> list[dict[str, str]]:
    """The page's form, in order: {"name", "label", "input", "help"} per field, the controls' from the registry."""
    plain = lambda fields: [{"name": n, "label": label, "input": kind, "help": ""} for n, label, kind in fields]  # noqa: E731
    return [*plain(BEFORE_CONTROLS), *(c.form_field() for c in option_controls().values()), *plain(AFTER_CONTROLS)]


def _inputs() -> dict[str, str]:
    """{option: input kind} of every option a /api/sample body may carry (num_samples and guard besides the form)."""
    return {**{f["name"]: f["input"] for f in form_fields()}, "num_samples": "int", **dict.fromkeys(BOOL_OPTIONS, "bool")}


@dataclass
class SampleForm:
    """A Generate or Continue: the app's SampleRequest fields, how many candidates and the job id."""

    options: dict[str, Any]  # SampleRequest field -> value (None left out)
    candidates: int = 3
    job: str | None = None


@dataclass
class InfillForm:
    riff: str
    bars: tuple[int, int]
    options: dict[str, Any]  # seed, temperature, top_p
    job: str | None = None
    part: int | None = None  # the part to fill (index in the riff's parts, from 0); None: the one the model wrote


def _number(name: str, value: Any) -> int | float:
    """An int or float option from JSON (numbers or numeric strings, as an HTML form sends them)."""
    whole = _inputs().get(name, "int") == "int"
    try:
        if whole:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        out = float(value)
        if not math.isfinite(out):
            raise ValueError
        return out
    except (TypeError, ValueError):
        kind = "a whole number" if whole else "a number"
        raise GuitarformerError(f"{name} must be {kind}, not {value!r}", FIX) from None


def _per_bar(name: str) -> bool:
    control = option_controls().get(name)
    return control is not None and control.scope == BAR


def _check_available(name: str, info: RunInfo) -> None:
    opt = info.options.get(name)
    if opt is not None and not opt.available:
        raise GuitarformerError(f"this run cannot honour {name}: {opt.reason}", f"leave {name} empty; {FIX}")


def _job(body: dict) -> str | None:
    job = body.get("job")
    if job is None:
        return None
    if not isinstance(job, str) or not 1 <= len(job) <= 64 or not job.replace("-", "").isalnum():
        raise GuitarformerError(f"job must be a short id of letters, digits and dashes, not {job!r}",
                                "let the page make one, or leave it out")
    return job


def sample_form(body: Any, info: RunInfo) -> SampleForm:
    """Check a /api/sample (or /api/continue) body against the run."""
    if not isinstance(body, dict):
        raise GuitarformerError("the request body must be a JSON object of options", FIX)
    inputs = _inputs()
    known = set(inputs) | {"job"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise GuitarformerError(f"unknown option {', '.join(map(repr, unknown))}",
                                f"use only {', '.join(sorted(known))}")
    options: dict[str, Any] = {}
    for name, value in body.items():
        if name == "job" or value is None or value == "":
            continue  # empty: the run's default
        _check_available(name, info)
        if inputs[name] == "bool":
            if not isinstance(value, bool):
                raise GuitarformerError(f"{name} must be true or false, not {value!r}", FIX)
            options[name] = value
        elif inputs[name] == "text" or (_per_bar(name) and isinstance(value, str) and ":" in value):
            if not isinstance(value, str):  # (a bar control's number per bar is text: "1-4:0,5-8:7")
                raise GuitarformerError(f"{name} must be text, not {value!r}", FIX)
            options[name] = value
        else:
            options[name] = _number(name, value)
    candidates = options.pop("num_samples", 3)
    if not 1 <= candidates <= MAX_CANDIDATES:
        raise GuitarformerError(f"num_samples must be 1..{MAX_CANDIDATES}, not {candidates}",
                                "ask for fewer riffs at once")
    if not 1 <= options.get("bars", 1) <= MAX_BARS:
        raise GuitarformerError(f"bars must be 1..{MAX_BARS}, not {options['bars']}", "ask for fewer bars")
    return SampleForm(options, candidates, _job(body))


def infill_form(body: Any, info: RunInfo) -> InfillForm:
    """Check a /api/infill body: {"riff": id, "bars": [first, last], "part"?, "seed"?, "temperature"?, "top_p"?,
    "job"?}; `part` (the riff's parts, from 0) is checked against the riff by studio/parts.py."""
    if not isinstance(body, dict) or not isinstance(body.get("riff"), str):
        raise GuitarformerError("an infill request names the riff to change: {\"riff\": id, \"bars\": [first, last]}",
                                "send the id a /api/sample answer gave")
    if not info.can_infill:
        raise GuitarformerError("this run cannot regenerate bars: it was not trained with infilling",
                                "train with --set data.infill=0.3 (TabREMI), or use the shipped model")
    bars = body.get("bars")
    if not (isinstance(bars, list) and len(bars) == 2):
        raise GuitarformerError(f"bars must be [first, last] (1-based, inclusive), not {bars!r}", "e.g. [5, 8]")
    first, last = (_number("bars", b) for b in bars)
    unknown = sorted(set(body) - {"riff", "bars", "part", "seed", "temperature", "top_p", "job"})
    if unknown:
        raise GuitarformerError(f"unknown option {', '.join(map(repr, unknown))} for infill",
                                "use only riff, bars, part, seed, temperature, top_p, job")
    options = {k: _number(k, body[k]) for k in ("seed", "temperature", "top_p") if body.get(k) not in (None, "")}
    part = None if body.get("part") in (None, "") else _number("part", body["part"])
    return InfillForm(body["riff"], (first, last), options, _job(body), part)


def bars_of(gs: GuitarScore) -> int:
    """Bars up to the one the last note starts in (music/bars.py's rule, as the tokens and infilling count them;
    a note ringing past it adds no bar), at least 1."""
    end = max((n.time for n in gs.track.notes), default=0) + 1
    return max(1, count_bars(gs.score.time_signatures, gs.score.ticks_per_quarter, end))


def check_bar_range(bars: tuple[int, int], gs: GuitarScore, whose: str = "the riff's") -> None:
    """1 <= first <= last <= the riff's bars (`whose`: the part's, where a riff has several)."""
    first, last = bars
    n = bars_of(gs)
    if not 1 <= first <= last <= n:
        raise GuitarformerError(f"bars {first}-{last} are not within {whose} bars 1-{n}",
                                f"select bars between 1 and {n}, the first no later than the last")
