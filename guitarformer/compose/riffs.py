"""Riffs as the engine writes them: sample rows of token ids (with a prompt, controls and a bar limit) and decode
them into fretted GuitarScores. Reading files, continuing them and writing riffs out is the `sample` command's
(app/sample.py); this module sees only token ids, the tokenizer and the model."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import symusic
import torch

from guitarformer.vocab.seen import MIN_SHARE, Seen
from guitarformer.vocab.tab_tokens import has_controls, is_tab_tokenizer
from guitarformer.vocab.tokenization import bar_ids, decode, decode_guitar, special_ids
from guitarformer.fingering import finger_score
from guitarformer.compose.conditioning import Conditions
from guitarformer.generation.constraint.guitar import Asked, GuitarConstraint, constraint_device
from guitarformer.generation.decode.engine import StopTokens, generate
from guitarformer.compose.form import FormCounts, Plan, agree
from guitarformer.generation.constraint.guards import meter_quarters
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.models.kinds import kind_of
from guitarformer.music.bars import bar_lines, bar_starts
from guitarformer.music.guitar import GUITAR_PROGRAM, STANDARD_TUNING, playable_range
from guitarformer.music.score import UNPLAYABLE, GuitarScore


@dataclass
class Riff:
    ids: list[int]
    gs: GuitarScore
    frets: list[tuple[int, int]] = field(default_factory=list)
    new_bars: int = 0  # bars the model wrote (after the prompt's last bar, if there is a prompt)
    new_notes: int = 0
    ended: bool = True  # the model finished it (end token or bar limit); False: the token budget ran out
    files: dict[str, Path] = field(default_factory=dict)  # what the `sample` command wrote of it, by kind
    parts: list[GuitarScore] | None = None  # a band riff's parts (guitar, bass, drums; `gs` the first new stringed one)

    @property
    def score(self) -> GuitarScore:
        """The riff as a GuitarScore (frets and techniques with every note): the same object as `gs`."""
        return self.gs


@dataclass
class RiffRows:
    """What `sample_rows` drew: each row's ids (up to its own end token), whether the model ended it, and the
    prompt's tokens the rows continue (for an encoder-decoder, its source)."""

    rows: list[list[int]]
    ended: list[bool]
    context: list[int]
    kind: str  # the model's kind (models.kinds)

    def body(self, row: list[int]) -> list[int]:
        """A row as heard: an encoder-decoder's continuation after its source."""
        return kind_of(self.kind).heard(self.context, row)


@dataclass(frozen=True)
class Draws:
    """Which riffs (or fills) of a call seeded `seed` are drawn: `num` of them, riffs `first` .. `first + num - 1`
    or the `num` indices `first` lists (`riff_indices`); riff k draws from its own generator (`riff_seed`)."""

    num: int = 1
    seed: int = 0
    first: int | Sequence[int] = 0


@dataclass
class RiffSpec:
    """What the riffs continue and how they are written: `prompt` token ids (BOS first) to continue; the `tuning`
    and `capo` they are played in; `tempo` and `program` written into them; `position`, a fret to re-finger them in
    (`fret`; None: a tab-token model's own strings); `asked`, the controls as tokens (compose/conditioning.py);
    `forms`, one plan per riff (compose/form.py; None: the model alone)."""

    prompt: list[int] | None = None
    tuning: tuple[int, ...] = STANDARD_TUNING
    capo: int = 0
    tempo: float | None = None
    program: int | None = None
    position: int | None = None
    asked: Conditions | None = None
    forms: list[Plan] | None = None


def riff_seed(seed: int, k: int) -> int:
    """The seed of riff k of a call seeded `seed`: riff k is the same riff whatever the batch size or the number
    of riffs asked for (and riffs k and k + 1 are unrelated streams, unlike seeds s and s + 1 of one generator)."""
    return int.from_bytes(hashlib.sha256(f"guitarformer riff {seed} {k}".encode()).digest()[:8], "little") >> 1


def riff_forms(forms: FormCounts, seed: int, num: int, style: str | None = None, bars: int | None = None,
               first: int = 0) -> list[Plan]:
    """The forms of riffs `first` .. `first + num - 1` of a call seeded `seed`: riff k's drawn (FormCounts.draw) with
    a generator seeded `riff_seed(seed, k)`, so riff k's form, like its notes, depends only on the seed and k."""
    return [forms.draw(random.Random(riff_seed(seed, k)), style, bars) for k in range(first, first + num)]


def meters_to_draw(seen: Seen, style: str | None = None) -> dict[str, float]:
    """{meter: quarter notes} of the time the training bars spend in each meter (of `style`'s bars where one is
    given and seen), for the meters that hold at least MIN_SHARE of it: what `--time-signature auto` draws a riff's
    meter from, as often as the tunes are heard in it (by time, not bars: a 2/4 bar is half a 2/2 one). A rarer
    meter is mostly pickups and odd bars, 1/4 or 5/8, not one tunes are written in."""
    bars = (seen.style_meters.get(style) if style else None) or seen.counts.get("TimeSig", {})
    time = {m: n * meter_quarters(m) for m, n in sorted(bars.items())}
    total = sum(time.values()) or 1.0
    return {m: t for m, t in time.items() if t / total >= MIN_SHARE}


def riff_meters(meters: dict[str, float], seed: int, num: int, first: int = 0) -> list[str]:
    """The time signatures of riffs `first` .. `first + num - 1` of a call seeded `seed`: riff k's drawn from
    `meters` ({meter: weight}, `meters_to_draw`) by a generator of its own, seeded by `riff_seed(seed, k)` in a
    stream apart from its form's, so riff k's meter depends only on the seed and k."""
    names, weights = list(meters), list(meters.values())
    return [random.Random(f"meter {riff_seed(seed, k)}").choices(names, weights)[0] for k in range(first, first + num)]


def riff_indices(first: int | Sequence[int], num: int) -> list[int]:
    """The riffs a batch holds: `first` .. `first + num - 1`, or the `num` indices `first` lists (riffs grouped by
    what they ask, such as a drawn meter)."""
    ks = list(range(first, first + num)) if isinstance(first, int) else list(first)
    if len(ks) != num:
        raise ValueError(f"{num} riffs asked for and {len(ks)} indices given")
    return ks


def _opening(tokenizer, prompt: list[int] | None, asked: Conditions, streams: bool, bars: int | None
             ) -> tuple[list[int], list[int], int | None, bool, bool]:
    """(prompt ids, the riff's first tokens after them, the bar limit for `generate`, whether the meter comes after
    one sampled token, whether the prompt opens the first new bar): where the asked controls go and which bar the
    new ones start."""
    sp, bar_tokens = special_ids(tokenizer), bar_ids(tokenizer)
    p_ids = list(prompt or [sp["bos"]])
    if asked.piece:  # what the whole piece is: right after BOS, kept there when the window slides
        p_ids = [p_ids[0], *asked.piece, *p_ids[1:]]
    # A decoder continuing a prompt starts a new bar (REMI: a Bar token), as an encoder-decoder's target does: the new
    # bars are the model's own, never the rest of the prompt's last bar. That bar is the first of `bars`.
    open_bar = prompt is not None and streams and bool(bar_tokens) and not getattr(tokenizer, "is_trained", False)
    max_bars = bars
    if open_bar:
        p_ids.append(bar_tokens[0])
        max_bars = None if bars is None else bars - 1
    head: list[int] = []  # no prompt: the riff's first bar opens in the prompt, with its controls and meter
    # A tempo without a time signature where every bar states one (REMI's Bar -> TimeSig): the model chooses the
    # time signature, as the one token after the first Bar and its controls, and the tempo follows it.
    meter_later = bool(asked.meter) and tokenizer[asked.meter[0]].startswith("Position_") and \
        "Position" not in tokenizer.tokens_types_graph.get("Bar", ())
    if prompt is None and asked:
        head = [bar_tokens[0], *asked.bar, *([] if meter_later else asked.meter)]
        max_bars = None if bars is None else bars - 1
    elif open_bar:
        p_ids += asked.bar
    return p_ids, head, max_bars, bool(head) and meter_later, bool(head) or open_bar


def sample_rows(model, tokenizer, cfg, params: SamplingParams, draws: Draws = Draws(), spec: RiffSpec = RiffSpec(),
                device="cpu") -> RiffRows:
    """The rows `draws` names, in one batch; each row draws from its own generator seeded `riff_seed(seed, k)`, so
    row k depends only on the model, the options, the seed and k.

    `spec.prompt`: token ids (BOS first) to continue (a decoder continues them; an encoder-decoder encodes them as
    the source). `params.max_bars`: new bars at most. `spec.asked` (a run with controls, compose/conditioning.py):
    piece controls after BOS, each bar's controls after its Bar (forced), the meter opening the first bar, the guards.
    `spec.forms`: one plan per row (compose/form.py), the bars it repeats forced, where the asked bar controls
    agree."""
    num, prompt, forms = draws.num, spec.prompt, spec.forms
    sp = special_ids(tokenizer)
    gens = [torch.Generator(device="cpu").manual_seed(riff_seed(draws.seed, k)) for k in riff_indices(draws.first, num)]
    asked = spec.asked or Conditions()
    meter = [i for i in asked.meter if tokenizer[i].startswith(("TimeSig_", "Tempo_"))]  # asked: kept every bar
    kind = kind_of(cfg.model.kind)
    p_ids, head, max_bars, meter_later, opens = _opening(tokenizer, prompt, asked, kind.streams, params.max_bars)
    rules = Asked(bar_controls=asked.bar_controls() if asked and has_controls(tokenizer) else None,
                  fixed=meter or None, region=asked.region, guards=asked.guard,
                  form=[agree(p, asked) for p in forms] if forms else None, prompt_opens_bar=opens)
    constraint = GuitarConstraint(tokenizer, spec.tuning, capo=spec.capo, device=constraint_device(device, num),
                                  asked=rules)
    front = 1 + len(asked.piece)  # BOS and the piece controls
    start = kind.prompt(p_ids, head, sp["bos"], num, device, keep_front=front,
                        src_block_size=cfg.model.src_block_size)
    stops = {"generator": gens, "constraint": constraint, "stops": StopTokens(sp["eos"], bar_ids(tokenizer))}
    if meter_later:
        one = SamplingParams(1, params.temperature, params.top_k, params.top_p)
        ids = generate(model, start, one, **stops)
        start = replace(start, ids=torch.cat([ids, torch.tensor([asked.meter] * num, dtype=torch.long,
                                                                device=ids.device)], 1))
    guide = None  # classifier-free guidance on the piece's controls: the same rows without them
    if params.guidance and asked.piece:
        if start.src is None:  # a decoder: they follow BOS in its ids
            guide = replace(start, ids=torch.cat([start.ids[:, :1], start.ids[:, front:]], 1), keep_front=1)
        else:  # an encoder-decoder: they follow BOS in its source
            guide = replace(start, src=torch.cat([start.src[:, :1], start.src[:, front:]], 1),
                            src_key_mask=torch.cat([start.src_key_mask[:, :1], start.src_key_mask[:, front:]], 1))
    out = generate(model, start, replace(params, max_bars=max_bars), guide=guide, **stops)
    t0, eos = start.ids.shape[1], sp["eos"]
    rows, ended = [], []
    for row in out.tolist():
        # The batch pads finished rows with end tokens until its last row ends: a row's ids stop at its own end.
        done = eos in row[t0:]
        rows.append(row[:t0 + row[t0:].index(eos) + 1] if done else row)
        ended.append(done)
    src = start.src[0].tolist() if start.src is not None else p_ids
    return RiffRows(rows, ended, src, kind.name)


def generate_riffs(model, tokenizer, cfg, params: SamplingParams = SamplingParams(), draws: Draws = Draws(),
                   spec: RiffSpec = RiffSpec(), device="cpu") -> list[Riff]:
    """The riffs `draws` names (see `sample_rows`), decoded and fretted (in `spec.position` if given, see `fret`; a
    tab-token model's own strings are kept otherwise). `spec.prompt`: token ids decoded with the riff (its new bars
    marked by GuitarScore.extra["generated_from_tick"]). `params`: the token budget, filters, bar limit
    (`max_bars`), classifier-free guidance on `spec.asked`'s piece controls and the compiled step
    (generation/decode/sampling.py)."""
    drawn = sample_rows(model, tokenizer, cfg, params, draws, spec, device)
    prompt, tuning, tempo, position = spec.prompt, spec.tuning, spec.tempo, spec.position
    program = GUITAR_PROGRAM if spec.program is None else spec.program
    window = decode(tokenizer, drawn.context) if prompt is not None else None
    riffs = []
    for row, ended in zip(drawn.rows, drawn.ended):
        body = drawn.body(row)
        if is_tab_tokenizer(tokenizer):  # the model wrote strings and techniques: keep them
            played = decode_guitar(tokenizer, body, tuple(tuning), spec.capo, program, tempo)
            riff = _riff_of(played.score, window, tuning, position, played)
        else:
            riff = _riff_of(decode(tokenizer, body, program=program, tempo=tempo), window, tuning, position)
        riff.ids, riff.ended = row, ended
        riffs.append(riff)
    return riffs


def _riff_of(score: symusic.Score, window: symusic.Score | None, tuning, position,
             played: GuitarScore | None = None) -> Riff:
    """A riff decoded whole, new bars marked after a prompt. `played`: the same notes with the strings and
    techniques a tab-token model wrote, kept unless `position` asks for a re-fingering (a note its string cannot
    play gets `fret()`'s choice)."""
    if played is None:
        score = clamp_to_tuning(score, tuning)
    gs = GuitarScore(score=score, tuning=tuple(tuning), capo=played.capo if played else 0, name="riff",
                     source_format="generated")
    new_from = 0
    if window is not None:
        new_from = new_bars_from(score, window)
        gs.extra["generated_from_tick"] = new_from
    if played is not None and played.frets is not None and position is None:
        gs.techniques = played.techniques
        fallback = finger_score(gs).frets if UNPLAYABLE in played.frets else None
        gs.frets = [f if f != UNPLAYABLE else fallback[k] for k, f in enumerate(played.frets)]
    else:
        gs.frets = finger_score(gs, position).frets
    new = [n for n in gs.track.notes if n.time >= new_from]
    end = max((n.time + n.duration for n in new), default=new_from)
    return Riff(ids=[], gs=gs, frets=gs.frets, new_notes=len(new), new_bars=bars_spanned(score, new_from, end))


def new_bars_from(score: symusic.Score, window: symusic.Score) -> int:
    """Tick (in `score`, which starts with `window`) of the first bar line after the window's last onset."""
    notes = window.tracks[0].notes if window.tracks else []
    last = max((n.time for n in notes), default=-1)
    return bar_lines(score.time_signatures, score.ticks_per_quarter, last + 1)[-1] if last >= 0 else 0


def bars_spanned(score, start: int, end: int) -> int:
    """Bars from the bar line `start` up to tick `end`."""
    if start >= end:
        return 0
    return sum(1 for t in bar_starts(score.time_signatures, score.ticks_per_quarter, end) if t >= start)


def clamp_to_tuning(score, tuning: tuple[int, ...]):
    """Lenient repair: notes outside the tuning's range move by octaves into it; at most len(tuning) notes
    start together (the highest-velocity ones kept)."""

    lo, hi = playable_range(tuning)
    for tr in score.tracks:
        notes = []
        for n in tr.notes:
            p = n.pitch
            while p < lo:
                p += 12
            while p > hi:
                p -= 12
            notes.append((n.time, n.duration, p, n.velocity))
        by_onset: dict[int, list] = {}
        for n in notes:
            by_onset.setdefault(n[0], []).append(n)
        kept = []
        for t, group in by_onset.items():
            uniq = {}
            for n in group:
                uniq.setdefault(n[2], n)  # one note per pitch
            kept.extend(sorted(uniq.values(), key=lambda n: -n[3])[: len(tuning)])
        tr.notes.clear()
        tr.notes.extend([symusic.Note(*n) for n in sorted(kept)])
    return score


def generate_riff(model, tokenizer, cfg, device, seed: int = 0, max_new_tokens: int = 256) -> Riff:
    """One riff with the run's sampling settings (the riff a training run shows in TensorBoard)."""
    s = cfg.sample
    params = SamplingParams(max_new_tokens, s.temperature, s.top_k or None, s.top_p)
    return generate_riffs(model, tokenizer, cfg, params, Draws(1, seed), device=device)[0]
