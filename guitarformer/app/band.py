"""`sample --parts` and `sample --accompany`: a band riff (guitar, bass, drums) from a run that learned the band, or
the parts a user's file lacks written for the parts it has."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from guitarformer.app.files import read_user_parts
from guitarformer.runs.run import Run
from guitarformer.app.requests import SampleRequest
from guitarformer.vocab.parts import PART_ROLES
from guitarformer.data.band import pick_parts
from guitarformer.vocab.song_tokens import check_band
from guitarformer.errors import GuitarformerError
from guitarformer.compose.band import BandAsk, accompany_rows, band_parts, band_rows
from guitarformer.compose.riffs import Riff
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.music.bars import bar_starts, count_bars
from guitarformer.music.guitar import BASS_TUNING, STANDARD_TUNING
from guitarformer.music.score import GuitarScore
from guitarformer.music.song import Song

DEFAULT_BARS = 4  # a band riff's bars where none are asked
TOKENS_PER_PART_BAR = 160  # the budget a part's bar gets (a dense guitar bar with controls takes about this)


def parse_parts(value: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """"guitar,bass,drums" -> ("guitar", "bass", "drums"), each known, each once."""
    if value is None or value == "":
        return ()
    names = [p.strip().lower() for p in (value.split(",") if isinstance(value, str) else value) if p.strip()]
    unknown = [p for p in names if p not in PART_ROLES]
    if unknown or len(set(names)) != len(names):
        raise GuitarformerError(f"--parts {','.join(names)}: " + (f"no part named {unknown[0]!r}" if unknown
                                                                   else "a part named twice"),
                                f"name parts among {', '.join(PART_ROLES)}, each once (e.g. --parts guitar,bass,drums)")
    return tuple(names)


def _tunings(tuning: tuple[int, ...] | None) -> dict[str, tuple[tuple[int, ...], int]]:
    return {"guitar": (tuning or STANDARD_TUNING, 0), "bass": (BASS_TUNING, 0)}


def band_roles_asked(req: SampleRequest, loaded: Run) -> tuple[str, ...]:
    """The parts to write, in the band's order; refused where the run's tokens carry one part or lack one asked."""
    roles = check_band(loaded.tokenizer)
    asked = parse_parts(req.parts) or tuple(roles)
    missing = [p for p in asked if p not in roles]
    if missing:
        raise GuitarformerError(f"--parts: this run's band has no {missing[0]} part",
                                f"name parts among {', '.join(roles)}")
    return tuple(r for r in roles if r in asked)


def band_riffs(req: SampleRequest, loaded: Run, asked, tuning: tuple[int, ...] | None) -> list[Riff]:
    """The riffs of `req` as a band: from nothing (`req.parts`), or the parts `req.parts` names written for the
    parts of `req.accompany`. `asked`: the guitar's controls as tokens (generation/conditioning.py)."""
    write = band_roles_asked(req, loaded)
    bars = req.bars or DEFAULT_BARS
    budget = req.sampling.max_new_tokens or TOKENS_PER_PART_BAR * len(PART_ROLES) * (bars + 1)
    params = SamplingParams.from_config(loaded.cfg.sample, temperature=req.sampling.temperature,
                                        top_k=req.sampling.top_k, top_p=req.sampling.top_p, max_new_tokens=budget)
    if req.accompany is not None:
        return _accompany(req, loaded, write, replace(params, max_bars=req.bars), tuning)
    ask = BandAsk(list(write), _tunings(tuning), asked, req.num_samples, req.seed)
    rows = band_rows(loaded.model, loaded.tokenizer, ask, replace(params, max_bars=bars))
    return [_riff(loaded, row, ask, req.tempo) for row in rows]


def _riff(loaded: Run, row: list[int], ask: BandAsk, tempo: float | None,
          given: dict[str, GuitarScore] | None = None) -> Riff:
    parts = band_parts(loaded.tokenizer, row, ask, tempo)
    if given:
        parts = _with_given(parts, given)
    song = Song([gs for _, gs in parts], name="band")
    main = next((gs for r, gs in parts if r not in (given or {}) and r != "drums"), parts[0][1])
    new = sum(len(gs.track.notes) for r, gs in parts if r not in (given or {}))
    bars = count_bars(song.time_signatures, song.ticks_per_quarter, song.end())
    riff = Riff(row, main, list(main.frets or []), new_bars=bars, new_notes=new,
                ended=row[-1] == loaded.tokenizer["EOS_None"])
    riff.parts = [gs for _, gs in parts]
    return riff


def _with_given(parts: list[tuple[str, GuitarScore]], given: dict[str, GuitarScore]) -> list[tuple[str, GuitarScore]]:
    """The given parts as the user's file has them (not as the tokens quantised them), the written ones on its grid:
    its ticks per quarter, tempos and time signatures."""
    ref = next(iter(given.values())).score
    out = []
    for role, gs in parts:
        if role in given:
            out.append((role, given[role]))
            continue
        score = gs.score.resample(ref.ticks_per_quarter, min_dur=1)
        score.tempos, score.time_signatures = ref.tempos.copy(), ref.time_signatures.copy()
        gs.score = score
        out.append((role, gs))
    return out


def _accompany(req: SampleRequest, loaded: Run, write: tuple[str, ...], params: SamplingParams,
               tuning: tuple[int, ...] | None) -> list[Riff]:
    roles = check_band(loaded.tokenizer)
    path = Path(req.accompany)
    song = Song(read_user_parts(path, "all"), name=path.stem)
    if not req.parts:  # every band part the file lacks
        has = {gs.role for gs in song.parts}
        write = tuple(r for r in roles if r not in has) or write
    given = [(r, gs) for r, gs in pick_parts(song, [r for r in roles if r not in write])]
    if not given:
        raise GuitarformerError(f"{path.name} has no part to accompany: no {' or '.join(r for r in roles if r not in write) or 'other'} part",
                                "give a file with a guitar part (--parts bass,drums) or a bass and drum groove "
                                "(--parts guitar)")
    guitar = dict(given).get("guitar")
    tunings = _tunings(tuning or (guitar.tuning if guitar is not None else None))
    # The two orders the band learned: the guitar first (a bass and drums written for it), or the rhythm first (a
    # guitar part for a groove); a part given is read before the parts written after it in its bar.
    used = [r for r in roles if r in write or r in dict(given)]
    order = used if "guitar" in dict(given) else list(reversed(used))
    ask = BandAsk(order, tunings, None, req.num_samples, req.seed)
    if params.max_bars:  # the bars accompanied, and no more of the file
        given = [(r, _first_bars(gs, params.max_bars)) for r, gs in given]
    rows = accompany_rows(loaded.model, loaded.tokenizer, ask, given, params, loaded.cfg.model.block_size)
    return [_riff(loaded, row, ask, None, dict(given)) for row in rows]


def _first_bars(gs: GuitarScore, n: int) -> GuitarScore:
    """`gs` cut to its first `n` bars (notes that start in them, none ringing past their end)."""
    score = gs.score
    starts = bar_starts(score.time_signatures, score.ticks_per_quarter, score.end() + 1)
    if len(starts) <= n:
        return gs
    end = starts[n]
    keep = [k for k, note in enumerate(score.tracks[0].notes) if note.time < end]
    cut = score.copy()
    notes = [score.tracks[0].notes[k].copy() for k in keep]
    for note in notes:
        note.duration = max(1, min(note.duration, end - note.time))
    cut.tracks[0].notes = notes
    frets = [gs.frets[k] for k in keep] if gs.frets else gs.frets
    techs = [gs.techniques[k] for k in keep] if gs.techniques else gs.techniques
    return replace(gs, score=cut, frets=frets, techniques=techs)
