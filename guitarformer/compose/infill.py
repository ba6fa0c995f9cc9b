"""Bar infilling: write bars i..j of a song again, given the bars before and after them (the `infill` command).

The song is encoded as the run's tokens and cut at its Bar tokens; the bars nearest the gap on both sides that fit
the model's context go into the layout its training used (vocab/infill.py): a decoder continues
``BOS before FillBar.. after FillStart``, an encoder-decoder reads ``BOS before FillBar.. after`` as its source.
The sampler's GuitarConstraint starts from the bars before the gap (their time signature, the strings still
ringing into it), writes exactly the gap's number of bars (`max_bars`), each in the meter of the bar it replaces,
and lets nothing ring past the gap; so the fill fits the bar lines of the bars after it. Splicing the fill into the
song is the `infill` command's (app/infill.py): the new notes replace those whose onset, in the tokenizer's
quantised time, falls in the gap (`SongBars.onsets`), the notes the model saw there.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from guitarformer.vocab.infill import NO_INFILL_FIX, FillIds, decoder_layout, has_fill_tokens, seq2seq_layout, split_bars
from guitarformer.vocab.tab_tokens import decode_tab, has_controls, insert_controls, is_tab_tokenizer
from guitarformer.vocab.tokenization import encode
from guitarformer.errors import GuitarformerError
from guitarformer.generation.constraint.guitar import GuitarConstraint, constraint_device
from guitarformer.generation.decode.engine import StopTokens, generate
from guitarformer.fingering import finger_score
from guitarformer.compose.riffs import Draws, riff_seed
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.models.kinds import kind_of
from guitarformer.music.score import GuitarScore

FILL_MARGIN = 2.0  # token budget: twice what the bars took in the song (or the song's mean bar), for a busier fill
LIKELIHOOD_WEIGHT = 0.01  # a fill's z-scored likelihood among the candidates, beside its fit (docs/results/INFILL.md)


@dataclass
class SongBars:
    """A song as tokens cut at its bar lines, with where each bar starts, in the song's ticks and in the
    tokenizer's, and where each note starts in the tokenizer's (quantised) ticks: the time the model sees."""

    gs: GuitarScore
    head: list[int]  # tokens before the first Bar (the piece's controls)
    bars: list[list[int]]  # one token list per bar, each opening with its Bar token
    starts: list[int]  # song tick of each bar's start, then the end of the last bar
    grid_starts: list[int]  # the same bar lines in the tokenizer's ticks
    onsets: list[int]  # each note of gs.track.notes: its onset in the tokenizer's ticks, as miditok quantises it

    def notes_in(self, first: int, last: int) -> list[bool]:
        """For each note: does the model see it in bars first..last (1-based)?"""
        lo, hi = self.grid_starts[first - 1], self.grid_starts[last]
        return [lo <= t < hi for t in self.onsets]


def check_infill_run(tokenizer, cfg) -> FillIds:
    """The run's fill token ids; a clear error for a run not trained with infilling."""
    if not is_tab_tokenizer(tokenizer) or not has_fill_tokens(tokenizer) or cfg.data.infill <= 0:
        raise GuitarformerError(f"this run was not trained with infilling (data.infill={cfg.data.infill:g}, "
                                f"{'with' if has_fill_tokens(tokenizer) else 'no'} fill tokens in its tokenizer)",
                                NO_INFILL_FIX)
    return FillIds.of(tokenizer)


def song_bars(tokenizer, gs: GuitarScore, fill: FillIds) -> SongBars:
    """The song's tokens by bar (a part without a fingering gets fret()'s first; controls where the run has them)."""
    if gs.frets is None:
        gs.frets = finger_score(gs).frets
    ids = encode(tokenizer, gs)
    if has_controls(tokenizer):
        ids = insert_controls(tokenizer, ids, gs)
    head, bars = split_bars([i for i in ids if i not in (fill.bos, fill.eos)], fill.bars)
    # Bar lengths from each bar's TimeSig (REMI writes one after every Bar), in the tokenizer's ticks, then the song's.
    tpq = tokenizer.time_division
    scale = gs.score.ticks_per_quarter / tpq
    length, grid, t = 4 * tpq, [], 0
    for bar in bars:
        for i in bar:
            tok = tokenizer[int(i)]
            if tok.startswith("TimeSig_"):
                num, den = (int(x) for x in tok.split("_")[1].split("/"))
                length = num * 4 * tpq // den
                break
        grid.append(t)
        t += length
    grid.append(t)
    # miditok resamples the score to its own ticks per quarter (symusic's rounding) before it reads onsets.
    resampled = gs.score.resample(tpq, min_dur=1) if gs.score.ticks_per_quarter != tpq else gs.score
    onsets = [n.time for n in resampled.tracks[0].notes]
    return SongBars(gs, head, bars, [round(g * scale) for g in grid], grid, onsets)


class FillConstraint:
    """GuitarConstraint for a fill: its state starts from `state_ids` (BOS, the piece's head and the bars before the
    gap) whatever prompt the model reads; the fill has exactly `len(meters)` bars, bar j in the TimeSig `meters[j]`
    (-1: any); the placeholder tokens never come; it ends with `end_id` (FillEnd for a decoder, EOS otherwise)."""

    def __init__(self, inner: GuitarConstraint, state_ids: list[int], meters: list[int], fill: FillIds, end_id: int):
        self.inner, self.state_ids, self.fill, self.end_id = inner, state_ids, fill, end_id
        inner.whole_riff = False  # the bars are counted here; a gap's last bar may be a rest, as the song's was
        self.meters = torch.tensor(meters, dtype=torch.long)
        self._bars_t = torch.tensor(fill.bars, dtype=torch.long)

    def start(self, ids: torch.Tensor, max_bars: int | None = None) -> None:
        B, dev = ids.shape[0], ids.device
        self.inner.start(torch.tensor([self.state_ids] * B, dtype=torch.long, device=dev), max_bars)
        self.bars = torch.zeros(B, dtype=torch.long, device=dev)  # fill bars opened so far
        self.need_ts = torch.zeros(B, dtype=torch.bool, device=dev)  # a bar opened whose TimeSig has not come
        self.meters, self._bars_t = self.meters.to(dev), self._bars_t.to(dev)

    @property
    def notes_here(self):
        return self.inner.notes_here

    @property
    def device(self) -> torch.device:
        """Where the state lives (the host for a few rows of a GPU model: `generate` then draws there)."""
        return self.inner.device

    def update(self, new: torch.Tensor) -> None:
        self.inner.update(new)
        is_bar = torch.isin(new, self._bars_t)
        self.bars += is_bar.long()
        self.need_ts = (self.need_ts | is_bar) & ~self.inner.grammar.is_timesig[new]

    def mask(self, last: torch.Tensor, remaining: int | None = None) -> torch.Tensor:
        m = self.inner.mask(last, remaining)
        f, g, k = self.fill, self.inner.grammar, len(self.meters)
        m[:, [f.bar, f.start, f.end]] = False
        m[:, g.eos] &= self.bars >= k  # exactly k bars: no end before the last one is open
        want = self.meters[(self.bars - 1).clamp(0, k - 1)]  # (B,) the TimeSig of the bar being written
        rows = self.need_ts & (want >= 0)
        if bool(rows.any()):  # that bar's meter, after its bar controls (if any)
            keep = torch.zeros_like(m)
            keep[:, g.is_bar_ctrl] = True
            keep[torch.arange(m.shape[0], device=m.device), want.clamp(min=0)] = True
            m = torch.where(rows.unsqueeze(1), m & keep, m)
            stuck = rows & ~m.any(1)
            m[stuck, want[stuck]] = True
        if self.end_id != g.eos:
            m[:, self.end_id] = m[:, g.eos]
            m[:, g.eos] = False
        m[~m.any(1), self.end_id] = True
        return m


class FillPlan(NamedTuple):
    """What the model reads and writes for a fill: whole bars before and after the gap, the gap's bars (their
    meters), and the fill's token budget."""

    before: list[list[int]]
    span: list[list[int]]
    after: list[list[int]]
    budget: int


def plan(cfg, head: list[int], bars: list[list[int]], first: int, last: int, max_new_tokens: int | None = None
         ) -> FillPlan:
    """The bars first..last (1-based), the whole bars around them that fit the model's context beside the fill's
    token budget (twice what the bars took, or the piece's mean bar, when not given)."""
    n, k = len(bars), last - first + 1
    span = bars[first - 1:last]
    is_encdec = not kind_of(cfg.model.kind).streams  # the gap's surroundings go to an encoder, not the stream
    T, S = cfg.model.block_size, cfg.model.src_block_size
    mean_bar = sum(len(b) for b in bars) / max(1, n)
    budget = max_new_tokens or math.ceil(max(sum(len(b) for b in span), mean_bar * k) * FILL_MARGIN) + 8
    fixed = 1 + len(head) + k  # BOS, head, placeholders
    if is_encdec:
        budget, room = min(budget, T - 1), S - fixed
    else:
        budget = min(budget, max(T // 2, T - fixed - 1 - 2 * math.ceil(mean_bar)))
        room = T - fixed - 1 - budget  # FillStart, then the fill
    if room < 0 or budget < k:
        raise GuitarformerError(f"--bars {first}-{last}: {k} bars do not fit this model's context "
                                f"({S if is_encdec else T} tokens)", "fill fewer bars at a time")
    before, after = _context(bars, first - 1, last, room)
    return FillPlan(before, span, after, budget)


@dataclass
class Gap:
    """The bars to fill in a song: the run's fill ids (`check_infill_run`), the song's `head` (its piece controls),
    the `layout` (`plan`) and the `tuning` and `capo` the song is played in."""

    fill: FillIds
    head: list[int]
    layout: FillPlan
    tuning: tuple[int, ...]
    capo: int = 0


def sample_fill(model, tokenizer, cfg, gap: Gap, params: SamplingParams, draws: Draws = Draws(), device="cpu"
                ) -> tuple[list[int], bool]:
    """(the fill's tokens, whether the model closed it): `len(span)` bars in the meters of `span`'s bars, between
    `before` and `after`, in the layout of the run's model kind, constrained as the module docstring says.
    `params`: the sampling filters (its token budget and bar limit are the plan's). `draws.num` (the candidates) > 1
    samples that many fills at once (`draw_fills`) and keeps the one that ranks first (`rank_fills`: its fit to
    `before` and `after`, and the model's likelihood)."""
    rows, scores = draw_fills(model, tokenizer, cfg, gap, params, draws, device)
    if len(rows) > 1:
        rows = [rows[rank_fills(tokenizer, rows, scores, [*gap.layout.before, *gap.layout.after])]]
    row, ended = rows[0]
    return (row[:-1] if ended else row), ended


def draw_fills(model, tokenizer, cfg, gap: Gap, params: SamplingParams, draws: Draws = Draws(), device="cpu"
               ) -> tuple[list[tuple[list[int], bool]], list[float]]:
    """(one (tokens, closed) row per candidate, its end token kept where it has one; each row's mean log-probability
    per token under the model alone, without the sampler's filters, -inf for an empty row): `draws.num` fills sampled
    side by side, candidate r from `riff_seed(draws.seed, r)` (the first is the one fill of one candidate), as
    `sample_fill` describes. The log-probabilities are summed as the rows are drawn (`generate`'s `logprob`)."""
    fill, head, tuning, capo, seed = gap.fill, gap.head, gap.tuning, gap.capo, draws.seed
    before, span, after, budget = gap.layout
    k = len(span)
    kind = kind_of(cfg.model.kind)
    meters = [next((int(i) for i in bar if tokenizer[int(i)].startswith("TimeSig_")), -1) for bar in span]
    end_id = fill.end if kind.streams else fill.eos
    state = [fill.bos, *head, *(i for b in before for i in b)]
    n = max(1, int(draws.num))
    constraint = FillConstraint(GuitarConstraint(tokenizer, tuning, capo=capo, device=constraint_device(device, n)),
                                state, meters, fill, end_id)
    stops = {"generator": [torch.Generator(device="cpu").manual_seed(riff_seed(seed, r)) for r in range(n)],
             "constraint": constraint, "stops": StopTokens(end_id, list(fill.bars))}
    params = SamplingParams(budget, params.temperature, params.top_k, params.top_p, max_bars=k)
    if kind.streams:  # a decoder reads the gap's surroundings and the fill as one stream
        ids, t0 = decoder_layout(fill, head, before, span, after)
        context = ids[:t0]
    else:  # an encoder-decoder's source holds the placeholders; its target is the fill
        context, _ = seq2seq_layout(fill, head, before, span, after)
    prompt = kind.prompt(context, [], fill.bos, num=n, device=device)
    logprob = torch.zeros(n, device=constraint.device)
    out = generate(model, prompt, params, logprob=logprob, **stops)
    t0 = prompt.ids.shape[1]
    rows = []
    for row in out[:, t0:].tolist():
        ended = end_id in row
        rows.append((row[:row.index(end_id) + 1] if ended else row, ended))
    return rows, [float(lp) / len(row) if row else -math.inf for lp, (row, _) in zip(logprob.tolist(), rows)]


def bar_notes(tokenizer, ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pitch, duration in quarters, onset in its bar in quarters) of the notes of whole bars' tokens, in the meter
    of the first time signature among them (4/4 without one)."""
    score, _, _ = decode_tab(tokenizer, ids)
    tpq = score.ticks_per_quarter
    if not score.tracks or not len(score.tracks[0].notes):
        return np.zeros(0), np.zeros(0), np.zeros(0)
    a = score.tracks[0].notes.numpy()
    bar = 4 * tpq
    if len(score.time_signatures):
        ts = score.time_signatures[0]
        bar = ts.numerator * 4 * tpq // ts.denominator
    return a["pitch"].astype(float), a["duration"] / tpq, (a["time"] % bar) / tpq


def share_overlap(a, b) -> float:
    """How much two sets of values share: the sum over values of the smaller of the two shares (1: the same values in
    the same proportions, 0: none in common); NaN where either set is empty. Values that agree to 6 decimals count
    as one."""
    if not len(a) or not len(b):
        return math.nan
    ca, cb = Counter(np.round(a, 6).tolist()), Counter(np.round(b, 6).tolist())
    return sum(min(n / len(a), cb[v] / len(b)) for v, n in ca.items())


def fill_fit(made, near, measure=share_overlap) -> float:
    """How well a fill's notes fit the bars around its gap, both as `bar_notes`: the mean `measure` of their
    pitches, durations and onsets in the bar (0 where no feature can be compared: no evidence)."""
    fits = [x for x in (measure(m, r) for m, r in zip(made, near)) if math.isfinite(x)]
    return sum(fits) / len(fits) if fits else 0.0


def rank_fills(tokenizer, rows: list[tuple[list[int], bool]], scores: list[float], around: list[list[int]],
               measure=share_overlap, weight: float = LIKELIHOOD_WEIGHT, standardize: bool = True) -> int:
    """The index of the candidate fill to keep: the highest fit to the bars `around` the gap (`fill_fit` by
    `measure`) plus `weight` x its mean log-probability per token (`scores`, from `draw_fills`), by default in
    standard deviations from the candidates' mean, so the likelihood breaks near-ties whatever its scale. A fill the
    model closed wins over one cut short by the token budget, and a fill it could not score (empty) never wins.
    The other measures and weights are for comparing rules (benchmarks/bench_fill_rank.py)."""
    near = bar_notes(tokenizer, [i for b in around for i in b])
    s = np.asarray(scores, dtype=float)
    ok = np.isfinite(s)
    z = np.where(ok, s, 0.0)
    if standardize:
        spread = s[ok].std() if ok.sum() > 1 else 0.0
        z = np.where(ok, (s - s[ok].mean()) / spread, 0.0) if spread > 0 else np.zeros_like(s)

    def rank(r: int) -> tuple[bool, float]:
        row, ended = rows[r]
        if not ok[r]:
            return False, -math.inf
        return ended, fill_fit(bar_notes(tokenizer, row[:-1] if ended else row), near, measure) + weight * z[r]
    return max(range(len(rows)), key=rank)


def _context(bars: list[list[int]], a: int, b: int, room: int) -> tuple[list[list[int]], list[list[int]]]:
    """The whole bars nearest the gap bars[a:b] on each side, taken in turn while they fit in `room` tokens."""
    i, j, used = a - 1, b, 0
    take_before, take_after = [], []
    grow = [True, True]
    while any(grow):
        for side in (0, 1):
            if not grow[side]:
                continue
            k = i if side == 0 else j
            if not 0 <= k < len(bars) or used + len(bars[k]) > room:
                grow[side] = False
                continue
            used += len(bars[k])
            if side == 0:
                take_before.insert(0, bars[k])
                i -= 1
            else:
                take_after.append(bars[k])
                j += 1
    return take_before, take_after
