"""`sample`: riffs from a run, or a file continued, written as MIDI / tab / GP5 / WAV, and a summary."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from guitarformer.app.band import band_riffs, parse_parts
from guitarformer.app.files import write_band, write_song
from guitarformer.runs.run import Run, read_run
from guitarformer.app.prompt import Prompt, bars_of_score, read_prompt, tokens_per_bar
from guitarformer.app.requests import SampleRequest, Sampling, check_outputs
from guitarformer.app.splice import continue_part
from guitarformer.vocab.controls import Controls, density_value, option_value
from guitarformer.vocab.tab_tokens import has_controls
from guitarformer.vocab.tokenization import bar_ids, decode, decode_guitar, special_ids
from guitarformer.errors import GuitarformerError
from guitarformer.compose.conditioning import conditions
from guitarformer.generation.decode.engine import generate
from guitarformer.compose.form import Plan, check_form, parse_letters
from guitarformer.compose.riffs import (
    Draws,
    Riff,
    RiffSpec,
    generate_riffs,
    meters_to_draw,
    riff_forms,
    riff_meters,
    sample_rows,
)
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.models import kinds
from guitarformer.models.kinds import kind_of
from guitarformer.music.bars import count_bars
from guitarformer.music.guitar import GUITAR_PROGRAM, GUITAR_PROGRAMS, STANDARD_TUNING, parse_tuning, pitch_name
from guitarformer.music.texture import density
from guitarformer.pretrained import band_dir
from guitarformer.runs.rundir import has_pretrained
from guitarformer.render.audio import find_synth
from guitarformer.runtime import set_threads, step_work

MAX_SEED = 2**63 - 1
MAX_AUTO_TOKENS = 16384  # the most tokens `bars` raises the budget to on its own
GUIDANCE = 1.0  # classifier-free guidance on asked piece controls by default (docs/results/EVAL.md, style: 63% -> 69.6% on
# the quickstart's run, seed 1)
AUTO_METER = "auto"  # --time-signature auto: each riff's meter drawn from the run's training bars (`_meters`)
OWN_METER = "none"  # --time-signature none: the model's own, whatever the run's sample.time_signature says
BUDGET_MARGIN = 2.0  # bars vary: budget twice the average (a riff stops at its last bar, so room costs nothing)


@dataclass
class SampleResult:
    riffs: list[Riff]  # every riff sampled, each with the files written for it (`Riff.files`)
    lines: list[str] = field(default_factory=list)  # the summary: the run, then one line per riff
    warnings: list[str] = field(default_factory=list)  # riffs the token budget cut short; a form it could not draw
    run: str = ""  # Run.describe() of the run used


def check_sample_request(req: SampleRequest) -> None:
    """The request's numbers and files, checked before anything is loaded (the CLI's ranges, for every caller)."""
    asked = req.sampling
    checks = [
        (req.num_samples >= 1, "num_samples must be at least 1", req.num_samples),
        (req.batch_size is None or req.batch_size >= 1, "batch_size must be at least 1", req.batch_size),
        (req.bars is None or req.bars >= 1, "bars must be at least 1 (new bars to write)", req.bars),
        (asked.max_new_tokens is None or asked.max_new_tokens >= 1, "max_new_tokens must be at least 1",
         asked.max_new_tokens),
        (0 <= req.seed <= MAX_SEED, f"seed must be in 0..{MAX_SEED}", req.seed),
        (asked.top_p is None or 0 < asked.top_p <= 1, "top_p must be in (0, 1] (1 = off)", asked.top_p),
        (asked.top_k is None or asked.top_k >= 0, "top_k must be 0 (off) or more", asked.top_k),
        (asked.temperature is None or (math.isfinite(asked.temperature) and asked.temperature >= 0),
         "temperature must be 0 (greedy) or more", asked.temperature),
        (req.tempo is None or (math.isfinite(req.tempo) and req.tempo > 0), "tempo must be a positive number of BPM",
         req.tempo),
        (asked.guidance is None or (math.isfinite(asked.guidance) and asked.guidance >= 0),
         "guidance must be 0 (off) or more", asked.guidance),
    ]
    if req.program is not None and req.program not in GUITAR_PROGRAMS:
        # The model writes guitar parts: the program only names the sound a MIDI file asks for.
        raise GuitarformerError(f"--program {req.program}: the model writes guitar parts, and --program only names "
                                "the instrument the file asks to be played with (no note changes)",
                                f"use a General MIDI guitar, {GUITAR_PROGRAMS.start}-{GUITAR_PROGRAMS.stop - 1}")
    for ok, what, value in checks:
        if not ok:
            raise GuitarformerError(f"{what}, not {value}", "see `guitarformer sample --help`")
    if req.prompt is not None and req.time_signature not in (None, OWN_METER):
        raise GuitarformerError("--time-signature opens a riff of its own; a --prompt's new bars go on in the "
                                "prompt's time signature", "leave out --time-signature or --prompt")
    if req.track is not None and req.prompt is None:
        raise GuitarformerError("--track chooses the part of a --prompt file to continue, and no --prompt is given",
                                "add --prompt FILE, or leave out --track")
    check_form(req.form, req.bars)
    check_outputs(req.outputs, ("midi", "tab", "gp", "wav"))
    if (req.parts or req.accompany) and req.prompt is not None:
        raise GuitarformerError("--parts and --accompany write a band's parts; --prompt continues one part",
                                "leave out --prompt, or --parts and --accompany")
    parse_parts(req.parts)


def _tuning(value: str | tuple[int, ...] | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    return parse_tuning(value) if isinstance(value, str) else tuple(int(p) for p in value)


def _asked(req: SampleRequest, loaded: Run, tuning: tuple[int, ...] | None, meter: str | None = None,
           tempo: float | None = None):
    """The request's controls as tokens (compose/conditioning.py), refused where the run never learned them;
    `meter`: the time signature drawn for the riffs (`_meters`) or held from a prompt (`_held`) in place of the
    request's; `tempo`: the prompt's, where none is asked."""
    ts = meter or (None if req.time_signature in (AUTO_METER, OWN_METER) else req.time_signature)
    return conditions(loaded.tokenizer, tuning, req.tempo if req.tempo is not None else tempo, ts,
                      seen=loaded.seen, guard=req.guard, continuing=req.prompt is not None, **req.controls.asked())


def _held(req: SampleRequest, loaded: Run, file: Prompt | None) -> tuple[str | None, float | None, str | None]:
    """(time signature, tempo, a note for the summary) a continued file's new bars are held to: the meter of its
    last bar and, unless --tempo asks one, its tempo there, as the sampler's only TimeSig and Tempo values (the model
    alone opened new bars in meters the file never had: 9/8 after a 4/4 song). A meter the run never learned is not
    held (the new bars are then placed on the file's bar lines as the model wrote them), a tempo outside the run's
    is held at its nearest; the file keeps its own tempo either way."""
    if file is None or not bar_ids(loaded.tokenizer):
        return None, None, None
    meter = f"{file.meter[0]}/{file.meter[1]}"
    seen = loaded.seen
    known = f"TimeSig_{meter}" in loaded.tokenizer.vocab and (
        seen is None or not seen.counts.get("TimeSig") or meter in seen.known("TimeSig"))
    tempo = file.tempo
    if seen is not None and seen.tempo is not None:
        tempo = min(max(tempo, seen.tempo[0]), seen.tempo[1])
    has_tempo = any(t.startswith("Tempo_") for t in loaded.tokenizer.vocab)
    note = None if known else (f"{meter}: this run never learned the prompt's time signature, so the new bars' "
                               "meter is the model's own, placed on the prompt's bar lines")
    return (meter if known else None), (tempo if has_tempo else None), note


def _held_density(req: SampleRequest, loaded: Run, file: Prompt | None) -> SampleRequest:
    """A continuation's new bars keep the onsets per beat of the bars the model reads (their density class), where
    the user asks none and the run learned that class: left alone, a model trained on dense tunes continued a prelude
    of whole notes in sixteenths."""
    if file is None or req.controls.density is not None or not has_controls(loaded.tokenizer):
        return req
    gs, tpq = file.gs, max(1, file.gs.score.ticks_per_quarter)
    onsets = [n.time / tpq for n in gs.track.notes if file.start <= n.time < file.new_from]
    quarters = (file.new_from - file.start) / tpq
    if not onsets or quarters <= 0:
        return req
    value = density_value(density(onsets, quarters))
    if loaded.seen is not None and loaded.seen.counts.get("Density") and value not in loaded.seen.known("Density"):
        return req
    return replace(req, controls=Controls(**{**req.controls.asked(), "density": value}))


def _meters(req: SampleRequest, loaded: Run) -> tuple[list[str] | None, str | None]:
    """(riff k's time signature at k, None where the request's or the model's hold for every riff; a note for the
    summary). `auto` (asked, or the run's sample.time_signature where no time signature is asked) draws riff k's
    meter from the run's training bars (those of the asked style where one is asked), as often as the tunes are
    heard in it (compose/riffs.py `meters_to_draw`), with a generator seeded by the riff's seed: the model alone
    opens its riffs in the meters it leans to (the layout-3 candidates 2/2 and 2/4 where half the tunes' time is
    6/8), while each meter's bars it fills about as the tunes do (docs/results/TAB_TOKENS.md). A continued file keeps its
    meter; a style asked under the guard keeps its usual meter (generation/constraint/guards.py) unless auto is asked by name."""
    asked = req.time_signature if req.time_signature is not None else loaded.cfg.sample.time_signature
    if asked != AUTO_METER or req.prompt is not None:
        return None, None
    if req.time_signature is None and req.controls.style is not None and req.guard:  # the guard gives the style's usual meter
        return None, None
    style = None if req.controls.style is None else option_value("Style", req.controls.style)
    meters = meters_to_draw(loaded.seen, style) if loaded.seen is not None else {}
    if not meters or not bar_ids(loaded.tokenizer):
        return None, None if req.time_signature is None else (
            "--time-signature auto: this run has no counts of its training bars' meters, so its riffs take the "
            "model's own; --time-signature 6/8 asks one")
    return riff_meters(meters, req.seed, req.num_samples), None


def default_form(loaded: Run) -> str:
    """`--form` when none is asked: the run's `sample.form` where it has one (the release sets the shipped model's
    by measurement), else the model's own ("none") for a model that copies (model.copy) and "auto" for one that
    does not."""
    return loaded.cfg.sample.form or ("none" if loaded.cfg.model.copy else "auto")


def _forms(req: SampleRequest, loaded: Run) -> tuple[list[Plan] | None, str | None]:
    """(one plan per riff, None for none; a note for the summary): `auto` draws riff k's form from the run's
    tunes (of the asked style where it has some) with a generator seeded by the riff's seed; letters are one plan for
    every riff. A continued file (`prompt`) keeps the model's own form under `auto`: a tune's form is its opening.
    `form` None (the default) is `default_form`: the run's sample.form, else none where the model copies
    (model.copy): such a model repeats bars by itself (the quickstart's 33-37% of a riff's first 16 bars, the tunes
    43%), and a tune's form on top of that made its riffs repeat more than tunes (56%); else auto where the run has
    its tunes' forms and none, unsaid, where it has not."""
    form = check_form(req.form if req.form is not None else default_form(loaded), req.bars)
    if form == "none" or (form == "auto" and req.prompt is not None):
        return None, None
    n = req.num_samples
    if form != "auto":
        return [parse_letters(form, req.bars)] * n, None
    if loaded.forms is None or not loaded.forms.by_style:  # said where auto was asked, not where it is the default
        return None, None if req.form is None else (
            "--form auto: this run has no forms of its training tunes (it was trained before they were counted), so "
            "its riffs take the model's own form; --form AABB asks one")
    style = None if req.controls.style is None else option_value("Style", req.controls.style)
    return riff_forms(loaded.forms, req.seed, n, style, req.bars), None


def _budget(req: SampleRequest, loaded: Run, file: Prompt | None) -> SamplingParams:
    """The run's sampling settings with the request's in their place; with `bars` and no `max_new_tokens`, a token
    budget that fits the bars (from the tokens a bar takes in the prompt or the run's data)."""
    asked = req.sampling
    guidance = GUIDANCE if asked.guidance is None else asked.guidance
    params = SamplingParams.from_config(loaded.cfg.sample, max_new_tokens=asked.max_new_tokens,
                                        temperature=asked.temperature, top_k=asked.top_k, top_p=asked.top_p,
                                        max_bars=req.bars, guidance=guidance, compile=asked.compile)
    if req.bars and asked.max_new_tokens is None:
        per_bar = tokens_per_bar(loaded.tokenizer, loaded.cfg, file)
        need = min(MAX_AUTO_TOKENS, math.ceil(req.bars * per_bar * BUDGET_MARGIN) + 16)
        params = replace(params, max_new_tokens=max(params.max_new_tokens, need))
    return params


def _batches(req: SampleRequest, meters: list[str] | None) -> list[tuple[str | None, list[int]]]:
    """(the batch's drawn meter, its riffs' indices) for every batch: `batch_size` riffs in their order, or, with
    drawn meters, each meter's riffs apart (riff k keeps its index, so its seed: it is the riff that meter asked for
    by --time-signature would be)."""
    n = req.num_samples
    bs = max(1, min(req.batch_size or n, n))
    groups = {None: list(range(n))} if meters is None else \
        {m: [k for k in range(n) if meters[k] == m] for m in dict.fromkeys(meters)}
    return [(m, ks[i:i + bs]) for m, ks in groups.items() for i in range(0, len(ks), bs)]


def _draw(req: SampleRequest, loaded: Run, params: SamplingParams, file: Prompt | None,
          tuning: tuple[int, ...], asked: dict, forms: list[Plan] | None = None,
          meters: list[str] | None = None) -> list[Riff]:
    """Every riff the request asks for, in batches of `batch_size` (riff k never depends on the batch); `asked`:
    the controls as tokens, {None: the request's} or, with drawn meters, {meter: the request's in it}; `forms`:
    riff k's plan at k; `meters`: riff k's drawn time signature at k (`_meters`)."""
    model, tok, cfg, dev = loaded.model, loaded.tokenizer, loaded.cfg, loaded.device
    riffs: dict[int, Riff] = {}
    for meter, ks in _batches(req, meters):
        count, plans = len(ks), [forms[k] for k in ks] if forms else None
        draws = Draws(count, req.seed, ks)
        if file is None:
            spec = RiffSpec(None, tuning, 0, req.tempo, req.program, req.position, asked[meter], plans)
            made = generate_riffs(model, tok, cfg, params, draws, spec, dev)
            riffs.update(zip(ks, made))
            continue
        program = req.program
        if program is None:
            program = file.gs.track.program if file.gs.track.program in GUITAR_PROGRAMS else GUITAR_PROGRAM
        spec = RiffSpec(file.ids, tuning, file.gs.capo, asked=asked[meter], forms=plans)
        drawn = sample_rows(model, tok, cfg, params, draws, spec, dev)
        window = decode(tok, drawn.context)
        for k, row, ended in zip(ks, drawn.rows, drawn.ended):
            played = decode_guitar(tok, drawn.body(row), tuning, file.gs.capo, program=program)
            riff = continue_part(file, played, window, tuning, req.tempo, program, req.position, req.bars)
            riff.ids, riff.ended = row, ended
            riffs[k] = riff
    return [riffs[k] for k in sorted(riffs)]


def read_sample_prompt(req: SampleRequest, loaded: Run) -> Prompt | None:
    """The part of `req.prompt` to continue (its `track`) and the window of it the run's model reads; None without a
    prompt."""
    if req.prompt is None:
        return None
    room = kind_of(loaded.kind).prompt_room(loaded.cfg.model)
    return read_prompt(loaded.tokenizer, req.prompt, room, req.track, req.tracks)


def sample(req: SampleRequest, loaded: Run | None = None, file: Prompt | None = None) -> SampleResult:
    """The `sample` command: check the request, read the run (unless `loaded` is given) and check the request against
    what it learned, then load its weights, sample, write every output
    asked for (numbered riff_000.mid .. with several riffs) and summarise. Riff k depends only on the run, the
    options, the seed and k. A riff the token budget cut short is reported in `warnings`; riffs without a note are
    an error (nothing of them is written). `file`: `read_sample_prompt(req, loaded)` already made, where one file is
    continued request after request (the studio's candidates: a read and a window's encodings each, otherwise)."""
    check_sample_request(req)
    tuning = _tuning(req.tuning)
    synth = find_synth() if req.outputs.wav else None  # fail before the slow part
    band = bool(req.parts or req.accompany)
    run = req.run if req.run is not None or req.checkpoint is not None or not band or not has_pretrained(band_dir()) \
        else band_dir()  # the band without --run: the shipped band model
    loaded = loaded or read_run(run, req.checkpoint, req.device)  # its facts: what it can be asked, no weights yet
    if band:
        set_threads(req.threads, step_work(loaded.load_weights().model, req.num_samples))
        return _band(req, loaded, tuning, synth)
    file = read_sample_prompt(req, loaded) if file is None else file
    held_meter, held_tempo, held_note = _held(req, loaded, file)
    req = _held_density(req, loaded, file)
    asked = _asked(req, loaded, tuning, held_meter, held_tempo)
    meters, meter_note = _meters(req, loaded)
    asked_in = {None: asked} if meters is None else {m: _asked(req, loaded, tuning, m) for m in dict.fromkeys(meters)}
    tuning = tuning or (file.gs.tuning if file else STANDARD_TUNING)
    params = _budget(req, loaded, file)
    forms, note = _forms(req, loaded)
    set_threads(req.threads, step_work(loaded.load_weights().model, req.num_samples))  # the request holds: load them
    riffs = _draw(req, loaded, params, file, tuning, asked_in, forms, meters)
    empty = [r for r in riffs if not r.new_notes]
    if empty:
        raise _empty_error(riffs, empty, req, params, loaded, file)
    result = SampleResult(riffs, [loaded.describe()], [n for n in (note, meter_note, held_note) if n],
                          run=loaded.describe())
    for i, riff in enumerate(riffs):
        riff.files = write_riff(riff, req.outputs, i, len(riffs), synth, file)
        result.lines.append(_summary(riff, riff.files, req.bars, file))
        if req.bars and riff.new_bars < req.bars and not riff.ended:
            result.warnings.append(f"{riff.files.get('midi', f'riff {i}')}: wrote {riff.new_bars} of {req.bars} "
                                   f"bars: the token budget ({params.max_new_tokens}) ran out; raise --max-new-tokens")
    return result


def _band(req: SampleRequest, loaded: Run, tuning: tuple[int, ...] | None, synth) -> SampleResult:
    """`sample --parts` / `--accompany` (app/band.py): the riffs written whole, every part, and summarised."""
    asked = _asked(req, loaded, tuning) if req.accompany is None else None
    riffs = band_riffs(req, loaded, asked, tuning)
    if not any(r.new_notes for r in riffs):
        raise GuitarformerError("the band's riffs came out empty; nothing was written",
                                "try another --seed or a higher --temperature")
    result = SampleResult(riffs, [loaded.describe()], run=loaded.describe())
    for i, riff in enumerate(riffs):
        riff.files = {kind: write_band(riff.parts or [riff.gs], numbered(path, i, len(riffs)), synth)
                      for kind, path in req.outputs.items()}
        first, *rest = list(riff.files.values()) or [Path("(not written)")]
        parts = ", ".join(f"{gs.role} {len(gs.track.notes)} notes" for gs in riff.parts or [riff.gs])
        result.lines.append(f"{first}: {riff.new_bars} bars, {parts}" + (f"; {', '.join(map(str, rest))}"
                                                                          if rest else ""))
    return result


def numbered(path: Path, i: int, n: int) -> Path:
    """riff.mid for one riff; riff_000.mid, riff_001.mid .. for several."""
    return path if n == 1 else path.with_name(f"{path.stem}_{i:03d}{path.suffix}")


def write_riff(riff: Riff, outputs, i: int, n: int, synth=None, file: Prompt | None = None) -> dict[str, Path]:
    """Riff i of n written to every output asked for; {kind: path}. A continued `file` is written whole: its other
    parts as they were around the continued one (the ASCII tab: the continued part)."""
    parts, edited = (file.parts(riff.gs), file.edited) if file is not None else ([riff.gs], 0)
    return {kind: write_song(parts, edited, numbered(path, i, n), synth) for kind, path in outputs.items()}


def _summary(riff: Riff, files: dict[str, Path], bars: int | None, file: Prompt | None) -> str:
    notes = list(riff.gs.track.notes)
    rng = f"{pitch_name(min(n.pitch for n in notes))}-{pitch_name(max(n.pitch for n in notes))}"
    what = f"{bars_of_score(riff.gs.score)} bars" if file is None else _where(riff, file)
    note = f"; the model ended it after {riff.new_bars} of {bars} bars" if bars and riff.new_bars < bars \
        and riff.ended else ""
    first, *rest = list(files.values()) or [Path("(not written)")]
    extra = f"; {', '.join(str(p) for p in rest)}" if rest else ""
    return f"{first}: {what}, {len(notes)} notes, range {rng}{note}{extra}"


def _where(riff: Riff, file: Prompt) -> str:
    """Where a continued file's new bars are, by bar number, and what else of the file was written around them."""
    a, b = file.prompt_bars + 1, file.prompt_bars + riff.new_bars
    new = "none" if not riff.new_bars else f"bar {a}" if a == b else f"bars {a}-{b}"
    score = riff.gs.score
    total = count_bars(score.time_signatures, score.ticks_per_quarter, max(score.end(), file.others_end()))
    others = len(file.parts(riff.gs)) - 1
    kept = "" if not others else ("; its other part as it was" if others == 1 else
                                  f"; its {others} other parts as they were") + (
        f", on to bar {total}" if total > b else "")
    return f"{total} bars ({file.prompt_bars} from the prompt, {riff.new_bars} new: {new}{kept})"


def _empty_error(riffs, empty, req: SampleRequest, params: SamplingParams, loaded: Run,
                 file: Prompt | None) -> GuitarformerError:
    midi = req.outputs.midi
    names = [str(numbered(midi, riffs.index(r), len(riffs))) if midi else f"riff {riffs.index(r)}"
             for r in empty[:3]]
    cut = [r for r in empty if not r.ended]
    budget = params.max_new_tokens
    why = f"the token budget ({budget}) ran out before a note" if cut else "the model ended before writing a note"
    fix = (f"raise --max-new-tokens (a bar takes about {tokens_per_bar(loaded.tokenizer, loaded.cfg, file):.0f} "
           "tokens)") if cut else "try another --seed or a higher --temperature"
    listing = ", ".join(names) + (", ..." if len(empty) > 3 else "")
    return GuitarformerError(f"{len(empty)} of {len(riffs)} riffs came out empty ({listing}): {why}; nothing was "
                             "written", fix)


def warm_up(loaded: Run) -> None:
    """Compile the one-token step (`Sampling.compile`) before the first riff that needs it: a short riff (one
    row) and, for a decoder with controls, a guided step's two rows (the riff and its unconditioned twin), each its
    own graph. Writes no file; the studio runs it before the page opens (`studio --compile`)."""
    sample(SampleRequest(num_samples=1, bars=1, sampling=Sampling(compile=True)), loaded)
    if loaded.kind == "decoder" and has_controls(loaded.tokenizer):
        bos = kinds.Prompt(torch.tensor([[special_ids(loaded.tokenizer)["bos"]]], device=loaded.device))
        generate(loaded.model, bos, SamplingParams(4, compile=True, guidance=1.0), guide=bos)
