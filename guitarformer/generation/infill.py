"""Bar infilling: write bars i..j of a song again, given the bars before and after them (the `infill` command).

The song is encoded as the run's tokens and cut at its Bar tokens; the bars nearest the gap on both sides that fit
the model's context go into the layout its training used (data/infill.py): a decoder continues
``BOS before FillBar.. after FillStart``, an encoder-decoder reads ``BOS before FillBar.. after`` as its source.
The sampler's GuitarConstraint starts from the bars before the gap (their time signature, the strings still
ringing into it), writes exactly the gap's number of bars (`max_bars`), each in the meter of the bar it replaces,
and lets nothing ring past the gap; so the fill fits the bar lines of the bars after it. The new notes replace the
song's notes that start inside the gap; every other note keeps its time, string, fret and techniques.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import symusic
import torch

from guitarformer.data.controls import PREFIX
from guitarformer.data.infill import NO_INFILL_FIX, FillIds, decoder_layout, has_fill_tokens, seq2seq_layout, split_bars
from guitarformer.data.tab_tokens import has_controls, insert_controls, is_tab_tokenizer
from guitarformer.data.tokenization import decode_guitar, encode
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.generation.constraint import GuitarConstraint
from guitarformer.generation.engine import generate
from guitarformer.generation.riffs import fret_score, riff_seed
from guitarformer.music.score import PLAIN, UNPLAYABLE, GuitarScore
from guitarformer.readers import read_guitar
from guitarformer.render.ascii_tab import write_ascii_tab
from guitarformer.render.gp5 import write_gp5
from guitarformer.render.midi import write_midi
from guitarformer.runs import load_run
from guitarformer.runtime import resolve_device

FILL_MARGIN = 2.0  # token budget: twice what the bars took in the song (or the song's mean bar), for a busier fill
OUTPUTS = {".mid": "midi", ".midi": "midi", ".txt": "tab", ".tab": "tab", ".gp5": "gp5"}


@dataclass
class Filled:
    """A song with some bars written by the model."""

    gs: GuitarScore  # the whole song, the new bars in place
    frets: list[tuple[int, int]]
    bars: tuple[int, int]  # first, last (1-based)
    fill_ids: list[int]  # the model's tokens for the bars (no end token)
    new_notes: int
    ended: bool  # the model closed the fill (False: the token budget ran out)


@dataclass
class SongBars:
    """A song as tokens cut at its bar lines, with where each bar starts in the song's ticks."""

    gs: GuitarScore
    head: list[int]  # tokens before the first Bar (the piece's controls)
    bars: list[list[int]]  # one token list per bar, each opening with its Bar token
    starts: list[int]  # song tick of each bar's start, then the end of the last bar


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
        gs.frets = fret_score(gs)
    ids = encode(tokenizer, gs)
    if has_controls(tokenizer):
        ids = insert_controls(tokenizer, ids, gs)
    head, bars = split_bars([i for i in ids if i not in (fill.bos, fill.eos)], fill.bars)
    # Bar lengths from each bar's TimeSig (REMI writes one after every Bar), in the tokenizer's ticks, then the song's.
    tpq = tokenizer.time_division
    scale = gs.score.ticks_per_quarter / tpq
    length, starts, t = 4 * tpq, [], 0
    for bar in bars:
        for i in bar:
            tok = tokenizer[int(i)]
            if tok.startswith("TimeSig_"):
                num, den = (int(x) for x in tok.split("_")[1].split("/"))
                length = num * 4 * tpq // den
                break
        starts.append(round(t * scale))
        t += length
    starts.append(round(t * scale))
    return SongBars(gs, head, bars, starts)


class FillConstraint:
    """GuitarConstraint for a fill: its state starts from `state_ids` (BOS, the piece's head and the bars before the
    gap) whatever prompt the model reads; the fill has exactly `len(meters)` bars, bar j in the TimeSig `meters[j]`
    (-1: any); the placeholder tokens never come; it ends with `end_id` (FillEnd for a decoder, EOS otherwise)."""

    def __init__(self, inner: GuitarConstraint, state_ids: list[int], meters: list[int], fill: FillIds, end_id: int):
        self.inner, self.state_ids, self.fill, self.end_id = inner, state_ids, fill, end_id
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


def fill_bars(model, tokenizer, cfg, gs: GuitarScore, first: int, last: int, device="cpu", seed: int = 0,
              temperature: float = 1.0, top_k: int | None = None, top_p: float | None = 0.95,
              max_new_tokens: int | None = None) -> Filled:
    """Bars `first`..`last` (1-based, as `tab` numbers them) of `gs` written again by a run trained with infilling,
    given the bars around them; the rest of the song is kept as it is (module docstring)."""
    fill = check_infill_run(tokenizer, cfg)
    song = song_bars(tokenizer, gs, fill)
    n = len(song.bars)
    if not 1 <= first <= last <= n:
        raise GuitarformerError(f"--bars {first}-{last}: {gs.name or 'the song'} has {n} bars",
                                f"pass bars between 1 and {n}, the first before the last")
    before, span, after, budget = plan(cfg, song.head, song.bars, first, last, max_new_tokens)
    new, ended = sample_fill(model, tokenizer, cfg, fill, song.head, before, span, after, budget, gs.tuning, gs.capo,
                             device, seed, temperature, top_k, top_p)
    return _splice(song, first, last, new, tokenizer, ended)


def plan(cfg, head: list[int], bars: list[list[int]], first: int, last: int, max_new_tokens: int | None = None
         ) -> tuple[list[list[int]], list[list[int]], list[list[int]], int]:
    """(before, span, after, budget): the bars first..last (1-based), the whole bars around them that fit the model's
    context beside the fill's token budget (twice what the bars took, or the piece's mean bar, when not given)."""
    n, k = len(bars), last - first + 1
    span = bars[first - 1:last]
    is_encdec = cfg.model.kind == "encoder_decoder"
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
    return before, span, after, budget


def sample_fill(model, tokenizer, cfg, fill: FillIds, head: list[int], before: list[list[int]],
                span: list[list[int]], after: list[list[int]], budget: int, tuning: tuple[int, ...], capo: int = 0,
                device="cpu", seed: int = 0, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = 0.95) -> tuple[list[int], bool]:
    """(the fill's tokens, whether the model closed it): `len(span)` bars in the meters of `span`'s bars, between
    `before` and `after`, in the layout of the run's model kind, constrained as the module docstring says."""
    k = len(span)
    is_encdec = cfg.model.kind == "encoder_decoder"
    meters = [next((int(i) for i in bar if tokenizer[int(i)].startswith("TimeSig_")), -1) for bar in span]
    end_id = fill.eos if is_encdec else fill.end
    state = [fill.bos, *head, *(i for b in before for i in b)]
    constraint = FillConstraint(GuitarConstraint(tokenizer, tuning, capo=capo, device=device), state, meters, fill,
                                end_id)
    gen = [torch.Generator(device="cpu").manual_seed(riff_seed(seed, 0))]
    if is_encdec:
        src, _ = seq2seq_layout(fill, head, before, span, after)
        src_t = torch.tensor([src], dtype=torch.long, device=device)
        out = generate(model, torch.tensor([[fill.bos]], device=device), budget, temperature, top_k, top_p, gen,
                       True, constraint, end_id, k, list(fill.bars), src=src_t,
                       src_key_mask=torch.ones_like(src_t, dtype=torch.bool))
        t0 = 1
    else:
        ids, t0 = decoder_layout(fill, head, before, span, after)
        out = generate(model, torch.tensor([ids[:t0]], device=device), budget, temperature, top_k, top_p, gen,
                       True, constraint, end_id, k, list(fill.bars))
    row = out[0, t0:].tolist()
    ended = end_id in row
    return (row[:row.index(end_id)] if ended else row), ended


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


def _splice(song: SongBars, first: int, last: int, new_ids: list[int], tokenizer, ended: bool) -> Filled:
    """The song with the notes that start in bars first..last replaced by those the model wrote."""
    gs = song.gs
    lo, hi = song.starts[first - 1], song.starts[last]
    body = [i for i in new_ids if not tokenizer[int(i)].startswith(PREFIX)]
    made = decode_guitar(tokenizer, body, gs.tuning, gs.capo, program=gs.track.program)
    scale = gs.score.ticks_per_quarter / made.score.ticks_per_quarter
    new_notes = list(made.track.notes) if made.score.tracks else []
    new_frets = made.frets or [UNPLAYABLE] * len(new_notes)
    new_techs = made.techniques or [PLAIN] * len(new_notes)
    old = list(gs.track.notes)
    keep = [k for k, nt in enumerate(old) if not lo <= nt.time < hi]
    rows = [(old[k].time, old[k].pitch, 0, k) for k in keep]
    placed = [symusic.Note(lo + round(nt.time * scale), max(1, round(nt.duration * scale)), nt.pitch, nt.velocity)
              for nt in new_notes]
    rows += sorted(((nt.time, nt.pitch, 1, k) for k, nt in enumerate(placed)), key=lambda r: (r[0], r[1]))
    # Before the gap, the new notes, after it; a stable sort keeps the song's own note order on each side.
    rows.sort(key=lambda r: 1 if r[2] else (0 if r[0] < lo else 2))
    score = gs.score.copy()
    track = score.tracks[0]
    track.notes.clear()
    track.notes.extend(old[k] if src == 0 else placed[k] for _, _, src, k in rows)
    techs = gs.techniques if gs.techniques and len(gs.techniques) == len(old) else [PLAIN] * len(old)
    out = GuitarScore(score=score, tuning=gs.tuning, capo=gs.capo, name=gs.name, source_format="generated",
                      extra={**gs.extra, "generated_from_tick": lo})
    out.techniques = [techs[k] if src == 0 else new_techs[k] for _, _, src, k in rows]
    frets = [gs.frets[k] if src == 0 else new_frets[k] for _, _, src, k in rows]
    if UNPLAYABLE in frets:  # a note its string cannot play in this tuning: fret()'s choice for it alone
        fallback = fret_score(out)
        frets = [f if f != UNPLAYABLE else fallback[k] for k, f in enumerate(frets)]
    out.frets = frets
    return Filled(out, frets, (first, last), list(new_ids), len(placed), ended)


# ---------------------------------------------------------------- the `infill` command


def read_song(path: Path, tracks: str = "guitar") -> list[GuitarScore]:
    """The guitar parts of any readable file (every non-drum part with tracks="all"), with clear errors."""
    path = Path(path)
    fix = "pass a MIDI, Guitar Pro (3-8), ASCII tab, MusicXML or ABC file with a guitar part"
    if not path.is_file():
        raise GuitarformerError(f"{path} does not exist", fix)
    try:
        parts = read_guitar(path, tracks=tracks)
    except GuitarformerError:
        raise
    except SkipFile as e:
        raise GuitarformerError(f"{path.name}: {e}", fix) from None
    except Exception as e:  # the readers' own messages name the file and the problem
        raise GuitarformerError(f"could not read {path}: {e}", fix) from None
    parts = [p for p in parts if len(p.track.notes)]
    if not parts:
        raise GuitarformerError(f"{path.name} has no notes to keep around the bars", fix)
    return parts


def write_infill(gs: GuitarScore, bars: tuple[int, int], out: Path, run_dir=None, checkpoint=None, seed: int = 0,
                 temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                 max_new_tokens: int | None = None, tab_out=None, gp_out=None, device: str = "auto",
                 echo: Callable[[str], None] = print) -> Filled:
    """The `infill` command: load the run (newest under ./runs by default), fill the bars, write --out (MIDI, ASCII
    tab or GP5 by its extension) and the --tab / --gp extras."""
    out = Path(out)
    if out.suffix.lower() not in OUTPUTS:
        raise GuitarformerError(f"--out {out}: cannot write {out.suffix or 'a file without a suffix'}",
                                "name it .mid for MIDI, .txt for an ASCII tab or .gp5 for Guitar Pro 5")
    for flag, path in (("--out", out), ("--tab", tab_out), ("--gp", gp_out)):
        if path is not None and Path(path).is_dir():
            raise GuitarformerError(f"{flag} {path} is a folder", f"give {flag} a file name")
    dev = resolve_device(device)
    model, tokenizer, cfg = load_run(run_dir, checkpoint, str(dev))
    s = cfg.sample
    filled = fill_bars(model, tokenizer, cfg, gs, bars[0], bars[1], dev, seed,
                       s.temperature if temperature is None else temperature,
                       (s.top_k if top_k is None else top_k) or None, s.top_p if top_p is None else top_p,
                       max_new_tokens)
    written = []
    for path, kind in ((out, OUTPUTS[out.suffix.lower()]), (tab_out, "tab"), (gp_out, "gp5")):
        if path is None:
            continue
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "midi":
                write_midi(filled.gs, path)
            elif kind == "tab":
                write_ascii_tab(filled.gs, path, filled.frets)
            else:
                write_gp5(filled.gs, path, filled.frets)
        except OSError as e:
            raise GuitarformerError(f"cannot write {e.filename or path}: {e.strerror or e}",
                                    "choose output paths in a writable folder") from None
        written.append(str(path))
    note = "" if filled.ended else " (the token budget ran out before the fill's end: raise --max-new-tokens)"
    echo(f"{', '.join(written)}: bars {bars[0]}-{bars[1]} written again, {filled.new_notes} notes{note}")
    return filled
