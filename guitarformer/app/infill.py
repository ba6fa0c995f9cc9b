"""`infill`: bars i..j of a song written again by a run trained with infilling, spliced into the song at the bar
lines and in the quantised time the model saw (compose/infill.py lays out and samples the fill)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import symusic

from guitarformer.app.files import UserSong, pick_track, read_user_song, stringed, write_song
from guitarformer.runs.run import Run, load_run
from guitarformer.app.requests import MAX_CANDIDATES, InfillRequest, Sampling, check_outputs
from guitarformer.app.splice import splice
from guitarformer.vocab.controls import PREFIX
from guitarformer.vocab.tokenization import decode_guitar
from guitarformer.errors import GuitarformerError
from guitarformer.compose.infill import Gap, SongBars, check_infill_run, plan, sample_fill, song_bars
from guitarformer.compose.riffs import Draws
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.music.score import PLAIN, UNPLAYABLE, GuitarScore
from guitarformer.music.song import Song
from guitarformer.runtime import set_threads, step_work


@dataclass
class InfillResult:
    """A song with some bars written by the model."""

    score: GuitarScore  # the whole song, the new bars in place (frets and techniques with every note)
    bars: tuple[int, int]  # first, last (1-based)
    fill_ids: list[int]  # the model's tokens for the bars (no end token)
    new_notes: int
    ended: bool  # the model closed the fill (False: the token budget ran out)
    files: dict[str, Path] = field(default_factory=dict)  # what was written, by kind
    lines: list[str] = field(default_factory=list)  # the summary
    warnings: list[str] = field(default_factory=list)
    parts: list[GuitarScore] = field(default_factory=list)  # every part of the song written: `score` among them


def fill_bars(model, tokenizer, cfg, gs: GuitarScore, bars: tuple[int, int], sampling: Sampling = Sampling(),
              draws: Draws = Draws(), device="cpu") -> InfillResult:
    """Bars `bars` (first, last; 1-based, as `tab` numbers them) of `gs` written again by a run trained with
    infilling, given the bars around them; every other note is kept as it is. `sampling`: the filters (None: the
    run's) and the fill's token budget (None: twice what the bars take in the song); `draws`: the seed and the fills
    sampled at once, one kept (compose/infill.py `rank_fills`)."""
    first, last = bars
    params = SamplingParams.from_config(cfg.sample, temperature=sampling.temperature, top_k=sampling.top_k,
                                        top_p=sampling.top_p)
    fill = check_infill_run(tokenizer, cfg)
    song = song_bars(tokenizer, gs, fill)
    n = len(song.bars)
    if not 1 <= first <= last <= n:
        fix = "pass --bars 1-1: the song has one bar" if n == 1 else \
            f"pass bars between 1 and {n}, the first no later than the last (e.g. --bars 1-{min(2, n)})"
        raise GuitarformerError(f"--bars {first}-{last}: {gs.name or 'the song'} has {n} bar{'s' * (n != 1)}", fix)
    layout = plan(cfg, song.head, song.bars, first, last, sampling.max_new_tokens)
    new, ended = sample_fill(model, tokenizer, cfg, Gap(fill, song.head, layout, gs.tuning, gs.capo), params, draws,
                             device)
    return _splice_fill(song, first, last, new, tokenizer, ended)


def _splice_fill(song: SongBars, first: int, last: int, new_ids: list[int], tokenizer, ended: bool) -> InfillResult:
    """The song with the notes the model saw in bars first..last replaced by those it wrote."""
    gs = song.gs
    lo = song.starts[first - 1]
    body = [i for i in new_ids if not tokenizer[int(i)].startswith(PREFIX)]
    made = decode_guitar(tokenizer, body, gs.tuning, gs.capo, program=gs.track.program)
    scale = gs.score.ticks_per_quarter / made.score.ticks_per_quarter
    notes = list(made.track.notes) if made.score.tracks else []
    frets = made.frets or [UNPLAYABLE] * len(notes)
    techs = made.techniques or [PLAIN] * len(notes)
    placed = [(symusic.Note(lo + round(n.time * scale), max(1, round(n.duration * scale)), n.pitch, n.velocity), f, t)
              for n, f, t in zip(notes, frets, techs)]
    out = splice(gs, placed, lo, drop=song.notes_in(first, last))
    return InfillResult(out, (first, last), list(new_ids), len(placed), ended)


def _part(req: InfillRequest) -> tuple[UserSong, list[str]]:
    """The song with the part to fill, and a warning when the file has several guitar parts and none was chosen."""
    if isinstance(req.song, GuitarScore):
        return UserSong([req.song], 0), []
    if isinstance(req.song, Song):
        song, name = song_part(req.song, req.track, req.tracks), req.song.name or "the song"
    else:
        song, name = read_user_song(req.song, req.track, req.tracks), Path(req.song).name
    if req.track is None and song.choices > 1:
        return song, [f"{name} has {song.choices} parts: filling the first (choose another with --track)"]
    return song, []


def song_part(song: Song, track: str | None = None, tracks: str = "guitar") -> UserSong:
    """A song held in memory as `infill` edits it: the part `track` names (number from 1 or name, as `--track` names
    a file's) among its stringed parts (tracks="guitar": its guitar parts, where it has any), every part written back."""
    name = song.name or "the song"
    chosen_from = stringed(song.parts, name)
    if tracks != "all":
        chosen_from = [gs for gs in chosen_from if gs.role == "guitar"] or chosen_from
    part = chosen_from[0] if track is None else pick_track(chosen_from, track, name, tracks)
    index = next(k for k, gs in enumerate(song.parts) if gs is part)
    return UserSong(list(song.parts), index, len(chosen_from))


def infill(req: InfillRequest, loaded: Run | None = None) -> InfillResult:
    """The `infill` command: read the song (or take the GuitarScore or Song given), load the run (unless `loaded` is
    given), fill the bars, write every output asked for and summarise."""
    check_outputs(req.outputs, ("midi", "tab", "gp"))
    first, last = req.bars
    if not 1 <= req.candidates <= MAX_CANDIDATES:
        raise GuitarformerError(f"candidates {req.candidates}: between 1 and {MAX_CANDIDATES} fills are sampled at "
                                "once", f"pass a number from 1 to {MAX_CANDIDATES}")
    if not 1 <= first <= last:
        raise GuitarformerError(f"bars {first}-{last}: bars count from 1 and the first comes before the last",
                                "pass bars like (5, 8)")
    song, warnings = _part(req)
    gs = song.part
    loaded = loaded or load_run(req.run, req.checkpoint, req.device)
    set_threads(req.threads, step_work(loaded.model, 1))
    result = fill_bars(loaded.model, loaded.tokenizer, loaded.cfg, gs, (first, last), req.sampling,
                       Draws(req.candidates, req.seed), loaded.device)
    result.warnings = warnings
    result.parts = song.with_part(result.score)
    result.files = {kind: write_song(result.parts, song.index, path) for kind, path in req.outputs.items()}
    note = "" if result.ended else " (the token budget ran out before the fill's end: raise --max-new-tokens)"
    written = ", ".join(str(p) for p in result.files.values()) or "(nothing written)"
    others = len(song.parts) - 1
    kept = "" if not others else "; the other part as it was" if others == 1 else \
        f"; the {others} other parts as they were"
    result.lines = [loaded.describe(),
                    f"{written}: bars {first}-{last} written again, {result.new_notes} notes{kept}{note}"]
    return result
