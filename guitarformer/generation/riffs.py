"""Riffs: sample from a run, decode, finger and write them (the `sample` command)."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic
import torch

from guitarformer.data.prepare import binary_reason, unsupported_reason
from guitarformer.data.tab_tokens import has_controls, is_tab_tokenizer
from guitarformer.data.tokenization import (
    bar_ids,
    decode,
    decode_guitar,
    encode,
    special_ids,
)
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.fretting import fret
from guitarformer.generation.conditioning import Conditions, conditions
from guitarformer.generation.constraint import GuitarConstraint
from guitarformer.generation.engine import generate
from guitarformer.music.guitar import (
    GUITAR_PROGRAM,
    GUITAR_PROGRAMS,
    STANDARD_TUNING,
    parse_tuning,
    pitch_name,
    playable_range,
)
from guitarformer.music.score import PLAIN, UNPLAYABLE, GuitarScore
from guitarformer.readers import detect_format, read_guitar
from guitarformer.render.ascii_tab import write_ascii_tab
from guitarformer.render.audio import find_synth, render_wav
from guitarformer.render.gp5 import write_gp5
from guitarformer.render.midi import write_midi
from guitarformer.runs import load_run
from guitarformer.runtime import resolve_device

MAX_SEED = 2**63 - 1
MAX_AUTO_TOKENS = 16384  # the most tokens `--bars` raises the budget to on its own
TOKENS_PER_BAR = 33  # without a prompt or the run's data: REMI tokens per bar, first 8 built-in tunes (32.7)
BUDGET_MARGIN = 2.0  # bars vary: budget twice the average (a riff stops at its last bar, so room costs nothing)


@dataclass
class Riff:
    ids: list[int]
    gs: GuitarScore
    frets: list[tuple[int, int]] = field(default_factory=list)
    new_bars: int = 0  # bars the model wrote (after the prompt's last bar, if there is a prompt)
    new_notes: int = 0
    ended: bool = True  # the model finished it (end token or bar limit); False: the token budget ran out


@dataclass
class Prompt:
    """A file to continue: its guitar part as read, and the part of it the model sees (its last whole bars)."""

    gs: GuitarScore
    ids: list[int]  # BOS + the window's tokens (no EOS)
    start: int  # tick of gs where the window begins (a bar line)
    new_from: int  # tick of gs where the new bars begin: the first bar line after the last onset
    bars: int  # bars in the window
    prompt_bars: int  # bars of the whole part up to new_from


def riff_seed(seed: int, k: int) -> int:
    """The seed of riff k of a call seeded `seed`: riff k is the same riff whatever the batch size or the number
    of riffs asked for (and riffs k and k + 1 are unrelated streams, unlike seeds s and s + 1 of one generator)."""
    return int.from_bytes(hashlib.sha256(f"guitarformer riff {seed} {k}".encode()).digest()[:8], "little") >> 1


def generate_riffs(model, tokenizer, cfg, device="cpu", num: int = 1, seed: int = 0, max_new_tokens: int = 512,
                   temperature: float = 1.0, top_k: int | None = None, top_p: float | None = 0.95,
                   prompt: list[int] | Prompt | None = None, bars: int | None = None,
                   tuning: tuple[int, ...] = STANDARD_TUNING, tempo: float | None = None,
                   program: int | None = None, use_cache: bool = True, position: int | None = None,
                   first: int = 0, asked: Conditions | None = None) -> list[Riff]:
    """Sample riffs `first` .. `first + num - 1` of a call seeded `seed`, in one batch; each row draws from its own
    generator seeded `riff_seed(seed, k)`, so riff k depends only on the model, the options, the seed and k.

    `prompt`: token ids (BOS first) whose continuation is decoded with them, or a `Prompt` (a file): then the riff is
    the whole file with the new bars after it, in the file's tempo, time signature, program and fingering (unless
    `tempo`/`program` say otherwise; `tempo` then applies from the new bars on). A decoder continues the prompt;
    an encoder-decoder encodes it as the source and writes the continuation. `bars`: new bars at most.
    `asked` (a run with controls, generation/conditioning.py): piece controls after BOS, bar controls after every
    Bar (forced), the meter opening the first bar; the tokens of a position asked for this way replace `position`.
    Returns decoded, fretted riffs (in `position` if given, see `tab.fret`)."""

    sp = special_ids(tokenizer)
    file = prompt if isinstance(prompt, Prompt) else None
    p_ids = list(file.ids if file else prompt or [sp["bos"]])
    if program is None:
        program = file.gs.track.program if file and file.gs.track.program in GUITAR_PROGRAMS else GUITAR_PROGRAM
    # The generators live on CPU, so the same seed gives the same riff on every device.
    gens = [torch.Generator(device="cpu").manual_seed(riff_seed(seed, first + i)) for i in range(num)]
    capo = file.gs.capo if file else 0
    asked = asked or Conditions()
    meter = [i for i in asked.meter if tokenizer[i].startswith(("TimeSig_", "Tempo_"))]  # asked: kept every bar
    constraint = GuitarConstraint(tokenizer, tuning, capo=capo, device=device,
                                  bar_controls=asked.bar if asked and has_controls(tokenizer) else None,
                                  fixed=meter or None, region=asked.region)
    is_encdec = cfg.model.kind == "encoder_decoder"
    bar_tokens = bar_ids(tokenizer)
    if asked.piece:  # what the whole piece is: right after BOS, kept there when the window slides
        p_ids = [p_ids[0], *asked.piece, *p_ids[1:]]
    # A decoder continuing a prompt starts a new bar (REMI: a Bar token), as an encoder-decoder's target does: the new
    # bars are the model's own, never the rest of the prompt's last bar. That bar is the first of `bars`.
    open_bar = prompt is not None and not is_encdec and bool(bar_tokens) and not getattr(tokenizer, "is_trained", False)
    max_bars = bars
    if open_bar:
        p_ids.append(bar_tokens[0])
        max_bars = None if bars is None else bars - 1
    head: list[int] = []  # no file: the riff's first bar opens in the prompt, with its controls and meter
    # A tempo without a time signature where every bar states one (REMI's Bar -> TimeSig): the model chooses the
    # time signature, as the one token after the first Bar and its controls, and the tempo follows it.
    meter_later = bool(asked.meter) and tokenizer[asked.meter[0]].startswith("Position_") and \
        "Position" not in tokenizer.tokens_types_graph.get("Bar", ())
    if prompt is None and asked:
        head = [bar_tokens[0], *asked.bar, *([] if meter_later else asked.meter)]
        max_bars = None if bars is None else bars - 1
    elif open_bar:
        p_ids += asked.bar
    front = 1 + len(asked.piece)  # BOS and the piece controls
    if is_encdec:
        src_ids = p_ids[:front] + p_ids[front:][-(cfg.model.src_block_size - front):]
        src = torch.tensor([src_ids] * num, dtype=torch.long)
        start = torch.tensor([[sp["bos"], *head]] * num, dtype=torch.long)
        kw = {"src": src.to(device), "src_key_mask": torch.ones_like(src, dtype=torch.bool).to(device)}
    else:
        src_ids = []
        start = torch.tensor([p_ids + head] * num, dtype=torch.long)
        kw = {"keep_front": front}
    start = start.to(device)
    if head and meter_later:
        start = generate(model, start, 1, temperature, top_k, top_p, gens, use_cache, constraint, sp["eos"],
                         None, bar_tokens, **kw)
        start = torch.cat([start, torch.tensor([asked.meter] * num, dtype=torch.long, device=device)], 1)
    out = generate(model, start, max_new_tokens, temperature, top_k, top_p, gens, use_cache,
                   constraint, sp["eos"], max_bars, bar_tokens, **kw)
    t0 = start.shape[1]
    window = decode(tokenizer, src_ids or p_ids) if prompt is not None else None
    riffs = []
    for row in out.tolist():
        body = row if not is_encdec else src_ids + row  # the continuation is heard after its source
        ended = sp["eos"] in row[t0:]
        if file is not None:
            riff = _continue_file(file, decode(tokenizer, body, program=program), window, tuning, tempo, program,
                                  position)
        elif is_tab_tokenizer(tokenizer):  # the model wrote strings and techniques: keep them
            played = decode_guitar(tokenizer, body, tuple(tuning), capo, program, tempo)
            riff = _riff_of(played.score, window, tuning, position, played)
        else:
            riff = _riff_of(decode(tokenizer, body, program=program, tempo=tempo), window, tuning, position)
        # The batch pads finished rows with end tokens until its last row ends: a riff's ids stop at its own end.
        riff.ids, riff.ended = (row[:t0 + row[t0:].index(sp["eos"]) + 1] if ended else row), ended
        riffs.append(riff)
    return riffs


def _riff_of(score: symusic.Score, window: symusic.Score | None, tuning, position,
             played: GuitarScore | None = None) -> Riff:
    """A riff decoded whole (no prompt, or a prompt given as token ids), new bars marked after a prompt. `played`:
    the same notes with the strings and techniques a tab-token model wrote, kept unless `position` asks for a
    re-fingering (a note its string cannot play gets `fret()`'s choice)."""
    if played is None:
        score = clamp_to_tuning(score, tuning)
    gs = GuitarScore(score=score, tuning=tuple(tuning), capo=played.capo if played else 0, name="riff",
                     source_format="generated")
    new_from = 0
    if window is not None:
        new_from = _new_bars_from(score, window)
        gs.extra["generated_from_tick"] = new_from
    if played is not None and played.frets is not None and position is None:
        gs.techniques = played.techniques
        fallback = fret_score(gs) if UNPLAYABLE in played.frets else None
        gs.frets = [f if f != UNPLAYABLE else fallback[k] for k, f in enumerate(played.frets)]
    else:
        gs.frets = fret_score(gs, position)
    new = [n for n in gs.track.notes if n.time >= new_from]
    end = max((n.time + n.duration for n in new), default=new_from)
    return Riff(ids=[], gs=gs, frets=gs.frets, new_notes=len(new), new_bars=_bars_spanned(score, new_from, end))


def _continue_file(file: Prompt, dec: symusic.Score, window: symusic.Score, tuning, tempo, program, position) -> Riff:
    """The prompt file's part, whole and as written, followed by the notes the model wrote after its window."""
    ours = Counter(_key(n) for n in window.tracks[0].notes)
    new = []
    for n in dec.tracks[0].notes:  # the decoded body less the window's own notes
        if ours[_key(n)] > 0:
            ours[_key(n)] -= 1
        else:
            new.append(n)
    # Decoded ticks count from the window's first bar at the tokenizer's resolution; map them onto the file's.
    bar_dec = _new_bars_from(dec, window)
    scale = file.gs.score.ticks_per_quarter / dec.ticks_per_quarter

    def to_file(t: int) -> int:
        return file.new_from + round((t - bar_dec) * scale)

    begin = to_file(min([bar_dec] + [n.time for n in new]))
    part = symusic.Score(dec.ticks_per_quarter)
    part.tracks.append(symusic.Track(program=program))
    part.tracks[0].notes.extend(new)
    new_notes = [(to_file(n.time), max(1, round(n.duration * scale)), n.pitch, n.velocity)
                 for n in clamp_to_tuning(part, tuning).tracks[0].notes]

    score = file.gs.score.copy()
    track = score.tracks[0]
    track.program = program
    # Prompt notes first, then new ones; a stable sort keeps the prompt's own order (and so its frets) intact.
    rows = sorted([(n.time, n.pitch, 0, i) for i, n in enumerate(track.notes)] +
                  [(t, p, 1, i) for i, (t, _, p, _) in enumerate(new_notes)], key=lambda r: (r[0], r[1]))
    old = list(track.notes)
    track.notes.clear()
    track.notes.extend(old[i] if src == 0 else symusic.Note(*new_notes[i]) for _, _, src, i in rows)
    meter = _sig_at(score, begin)
    for ts in sorted(dec.time_signatures, key=lambda ts: ts.time):  # meter changes the model chose
        if ts.time >= bar_dec and (ts.numerator, ts.denominator) != meter:
            score.time_signatures.append(symusic.TimeSignature(to_file(ts.time), ts.numerator, ts.denominator))
            meter = (ts.numerator, ts.denominator)
    if tempo is not None:  # the new bars at the tempo asked for; the prompt keeps its own
        kept = [t for t in score.tempos if t.time < begin]
        score.tempos = kept + [symusic.Tempo(begin, float(tempo))]
    gs = GuitarScore(score=score, tuning=tuple(tuning), capo=file.gs.capo,
                     name=f"{file.gs.name} (continued)" if file.gs.name else "riff", source_format="generated",
                     extra={"generated_from_tick": begin})
    frets = fret_score(gs, position)
    written = file.gs.frets if file.gs.tuning == gs.tuning and position is None else None
    techniques = file.gs.techniques
    if written or techniques:  # the prompt's own fingering and techniques stay as written
        for k, (_, _, src, i) in enumerate(rows):
            if src == 0 and written:
                frets[k] = written[i]
        if techniques:
            gs.techniques = [techniques[i] if src == 0 else PLAIN for _, _, src, i in rows]
    gs.frets = frets
    end = max((t + d for t, d, _, _ in new_notes), default=file.new_from)
    return Riff(ids=[], gs=gs, frets=frets, new_notes=len(new_notes), new_bars=_bars_spanned(score, file.new_from, end))


def _key(n) -> tuple[int, int, int, int]:
    return n.time, n.duration, n.pitch, n.velocity


def _new_bars_from(score: symusic.Score, window: symusic.Score) -> int:
    """Tick (in `score`, which starts with `window`) of the first bar line after the window's last onset."""
    notes = window.tracks[0].notes if window.tracks else []
    last = max((n.time for n in notes), default=-1)
    return _bar_lines(score, last + 1)[-1]


def _bar_lines(score, end: int) -> list[int]:
    """Ticks where bars begin, from 0 up to the first bar line at or after `end`, following the score's time
    signatures (4/4 before the first; a change takes effect at the first bar line at or after it)."""
    tpq = score.ticks_per_quarter
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures)
    lines, tick, num, den = [0], 0, 4, 4
    while tick < end:
        for t, a, b in sigs:
            if t <= tick:
                num, den = a, b
        tick += max(1, tpq * 4 * num // den)
        lines.append(tick)
    return lines


def _sig_at(score, tick: int) -> tuple[int, int]:
    sig = (4, 4)
    for ts in sorted(score.time_signatures, key=lambda ts: ts.time):
        if ts.time <= tick:
            sig = (ts.numerator, ts.denominator)
    return sig


def _bars_spanned(score, start: int, end: int) -> int:
    """Bars from the bar line `start` up to tick `end`."""
    return sum(1 for t in _bar_lines(score, end)[:-1] if t >= start) if start < end else 0


def _count_bars(score) -> int:
    """Bars up to the score's end, following its time signatures (4/4 before the first)."""
    return len(_bar_lines(score, score.end())) - 1


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


def fret_score(gs: GuitarScore, position: int | None = None) -> list[tuple[int, int]]:

    return fret(list(gs.track.notes), gs.tuning, gs.capo, position=position, program=gs.track.program)


def generate_riff(model, tokenizer, cfg, device, seed: int = 0, max_new_tokens: int = 256) -> Riff:
    s = cfg.sample
    return generate_riffs(model, tokenizer, cfg, device, 1, seed, max_new_tokens, s.temperature, s.top_k or None,
                          s.top_p)[0]


# ---------------------------------------------------------------- prompts


def read_prompt(tokenizer, path: Path, max_tokens: int) -> Prompt:
    """The first guitar part of a MIDI/GP/tab/MusicXML file (a file without one: its first part), and the window
    the model sees: the last whole bars whose tokens fit in `max_tokens` (BOS included), re-encoded from the bar
    they start at, so that the window opens as every piece does (time signature, tempo)."""

    path = Path(path)
    fix = "pass a MIDI, Guitar Pro, ASCII tab or MusicXML file with notes"
    if not path.is_file():
        raise GuitarformerError(f"prompt file {path} does not exist", fix)
    try:
        if detect_format(path) is None:
            raise SkipFile(unsupported_reason(path))
        binary = binary_reason(path)
        if binary:
            raise SkipFile(binary)
        try:
            parts = read_guitar(path)
        except SkipFile:  # no guitar part: a piano or flute melody can be continued on guitar too
            parts = read_guitar(path, tracks="all")
    except SkipFile as e:
        raise GuitarformerError(f"prompt {path} is not readable music: {e}", fix) from None
    except GuitarformerError:
        raise
    except Exception as e:
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise GuitarformerError(f"prompt {path} is not readable music ({msg})", fix) from None
    if not parts or not len(parts[0].track.notes):
        raise GuitarformerError(f"prompt {path} has no notes", fix)
    gs = parts[0]
    score = gs.score
    last = max(n.time for n in gs.track.notes)
    lines = _bar_lines(score, last + 1)  # bar starts, then the first bar line after the last onset
    starts = lines[:-1]

    tab = is_tab_tokenizer(tokenizer)
    if tab and gs.frets is None:  # a tab-token model reads strings: a prompt without them gets fret()'s
        gs.frets = fret_score(gs)

    def window(i: int) -> list[int]:
        part = _from_tick(score, starts[i])
        if tab:  # the window's notes keep their fingering and techniques (notes from `start` on, in order)
            keep = [k for k, n in enumerate(gs.track.notes) if n.time >= starts[i]]
            techs = gs.techniques
            part = GuitarScore(score=part, tuning=gs.tuning, capo=gs.capo, frets=[gs.frets[k] for k in keep],
                               techniques=[techs[k] for k in keep] if techs else None)
        return encode(tokenizer, part)[:-1]

    lo, hi = 0, len(starts) - 1  # the earliest bar whose window fits (the last bar always does: a bar is whole)
    best = window(hi)
    while lo < hi:
        mid = (lo + hi) // 2
        ids = window(mid)
        if len(ids) <= max_tokens:
            hi, best = mid, ids
        else:
            lo = mid + 1
    return Prompt(gs=gs, ids=best, start=starts[hi], new_from=lines[-1], bars=len(starts) - hi,
                  prompt_bars=len(starts))


def _from_tick(score: symusic.Score, start: int) -> symusic.Score:
    """The score from `start` on, moved to tick 0, with the tempo and time signature in force at `start`."""
    out = symusic.Score(score.ticks_per_quarter)
    tempos = sorted(score.tempos, key=lambda e: e.time)
    sigs = sorted(score.time_signatures, key=lambda e: e.time)
    at_start = [e for e in tempos if e.time <= start][-1:]
    out.tempos.extend([symusic.Tempo(0, e.qpm) for e in at_start] +
                      [symusic.Tempo(e.time - start, e.qpm) for e in tempos if e.time > start])
    at_start = [e for e in sigs if e.time <= start][-1:]
    out.time_signatures.extend([symusic.TimeSignature(0, e.numerator, e.denominator) for e in at_start] +
                               [symusic.TimeSignature(e.time - start, e.numerator, e.denominator)
                                for e in sigs if e.time > start])
    src = score.tracks[0]
    track = symusic.Track(name=src.name, program=src.program, is_drum=False)
    track.notes.extend(symusic.Note(n.time - start, n.duration, n.pitch, n.velocity) for n in src.notes
                       if n.time >= start)
    out.tracks.append(track)
    return out


def tokens_per_bar(tokenizer, cfg, prompt: Prompt | None = None) -> float:
    """How many tokens a bar takes: the prompt's window, else the run's training data, else the built-in corpus's."""
    if prompt is not None and prompt.bars:
        return max(1.0, (len(prompt.ids) - 1) / prompt.bars)
    return _data_tokens_per_bar(tokenizer, cfg.data.dataset) or TOKENS_PER_BAR


def _data_tokens_per_bar(tokenizer, dataset: str, max_tokens: int = 40_000) -> float | None:
    """Tokens per bar over the first pieces of a prepared dataset's train split (None when it is not at hand)."""
    folder = Path(dataset or "").expanduser()
    try:
        dtype = json.loads((folder / "meta.json").read_text())["dtype"]
        flat = np.memmap(folder / "train.bin", dtype=dtype, mode="r")
        offsets = np.load(folder / "train.idx.npy")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    tokens = bars = 0
    for a, b in zip(offsets[:-1], offsets[1:]):
        ids = flat[a:min(b, a + max_tokens)].tolist()
        score = decode(tokenizer, ids)
        tokens += len(ids)
        bars += _count_bars(score)
        if tokens >= max_tokens:
            break
    return tokens / bars if bars else None


# ---------------------------------------------------------------- the `sample` command


def write_riffs(out: Path, run_dir=None, checkpoint=None, num_samples: int = 1, max_new_tokens=None, bars=None,
                temperature=None, top_k=None, top_p=None, seed: int = 0, prompt=None, tempo=None,
                tuning: str | None = None, program=None, tab_out=None, gp_out=None, device: str = "auto",
                echo=print, batch_size: int | None = None, wav_out=None, position: int | None = None,
                warn=None, time_signature: str | None = None, **controls) -> list[Path]:
    """The `sample` command: load, generate in batches of `batch_size`, write MIDI (+ tab, GP5, WAV), report.

    Riff k depends only on the run, the options, `seed` and k: not on the batch size or the number of riffs.
    With `bars` and no `max_new_tokens`, the token budget grows to fit the bars (from the tokens a bar takes in the
    prompt or the run's data); a riff the budget cut short is reported through `warn` (stderr by default).
    `controls` (key, density, polyphony, palm_mute, techniques, style) and `time_signature` ask a run trained with
    controls for them (generation/conditioning.py); with controls, `tuning`, `tempo` and `position` are asked too."""

    warn = warn or (lambda s: print(s, file=sys.stderr))
    out = Path(out)
    if out.suffix.lower() not in (".mid", ".midi"):
        raise GuitarformerError(f"--out {out} should be a MIDI file", "give it a .mid extension, e.g. --out riff.mid")
    _check_numbers(num_samples=num_samples, batch_size=batch_size, bars=bars, max_new_tokens=max_new_tokens,
                   seed=seed, top_p=top_p, top_k=top_k, temperature=temperature, tempo=tempo)
    for flag, path in (("--out", out), ("--tab", tab_out), ("--gp", gp_out), ("--wav", wav_out)):
        if path is not None:
            _ready_folder(Path(path), flag)  # before the slow part, as every file is written after it
    tun = parse_tuning(tuning) if tuning else None
    synth = find_synth() if wav_out else None  # fail before the slow part
    dev = resolve_device(device)
    model, tokenizer, cfg = load_run(run_dir, checkpoint, str(dev))
    if prompt and time_signature is not None:
        raise GuitarformerError("--time-signature opens a riff of its own; a --prompt's new bars go on in the "
                                "prompt's time signature", "leave out --time-signature or --prompt")
    asked = conditions(tokenizer, tun, tempo, time_signature, position, **controls)
    if has_controls(tokenizer):
        position = None  # asked for as the hand-position control: the model's own strings are kept
    s = cfg.sample
    is_encdec = cfg.model.kind == "encoder_decoder"
    file = None
    if prompt:  # a decoder keeps half its context for what it writes before the window slides
        room = cfg.model.src_block_size if is_encdec else max(2, cfg.model.block_size // 2 - 1)
        file = read_prompt(tokenizer, prompt, room)
    tun = tun or (file.gs.tuning if file else STANDARD_TUNING)
    budget = max_new_tokens or s.max_new_tokens
    if bars and max_new_tokens is None:
        per_bar = tokens_per_bar(tokenizer, cfg, file)
        budget = max(budget, min(MAX_AUTO_TOKENS, math.ceil(bars * per_bar * BUDGET_MARGIN) + 16))
    bs = max(1, min(batch_size or num_samples, num_samples))
    riffs: list[Riff] = []
    for first in range(0, num_samples, bs):
        riffs += generate_riffs(
            model, tokenizer, cfg, dev, min(bs, num_samples - first), seed, budget,
            s.temperature if temperature is None else temperature, (s.top_k if top_k is None else top_k) or None,
            s.top_p if top_p is None else top_p, file, bars, tun, tempo, program, position=position, first=first,
            asked=asked)
    written, empty = [], []
    for i, r in enumerate(riffs):
        path = _numbered(out, i, len(riffs))
        if not r.new_notes:
            empty.append((path, r))
            continue
        try:
            write_midi(r.gs, path)
            written.append(path)
            extra = []
            if tab_out:
                tp = _numbered(Path(tab_out), i, len(riffs))
                write_ascii_tab(r.gs, tp)
                extra.append(str(tp))
            if gp_out:
                gp = _numbered(Path(gp_out), i, len(riffs))
                write_gp5(r.gs, gp, r.frets)
                extra.append(str(gp))
        except OSError as e:
            raise GuitarformerError(f"cannot write {e.filename or path}: {e.strerror or e}",
                                    "choose output paths in a writable folder") from None
        if wav_out:
            wp = _numbered(Path(wav_out), i, len(riffs))
            render_wav(path, wp, synth)
            extra.append(str(wp))
        notes = list(r.gs.track.notes)
        rng = f"{pitch_name(min(n.pitch for n in notes))}-{pitch_name(max(n.pitch for n in notes))}"
        total = _count_bars(r.gs.score)
        what = f"{total} bars" + (f" ({file.prompt_bars} from the prompt, {r.new_bars} new)" if file else "")
        note = ""
        if bars and r.new_bars < bars and r.ended:
            note = f"; the model ended it after {r.new_bars} of {bars} bars"
        echo(f"{path}: {what}, {len(notes)} notes, range {rng}{note}" + (f"; {', '.join(extra)}" if extra else ""))
        if bars and r.new_bars < bars and not r.ended:
            warn(f"{path}: wrote {r.new_bars} of {bars} bars: the token budget ({budget}) ran out; "
                 "raise --max-new-tokens")
    if empty:
        cut = [p for p, r in empty if not r.ended]
        why = (f"the token budget ({budget}) ran out before a note" if cut else
               "the model ended before writing a note")
        fix = "raise --max-new-tokens" + (f" (a bar takes about {tokens_per_bar(tokenizer, cfg, file):.0f} tokens)"
                                          if cut else "") if cut else "try another --seed or a higher --temperature"
        names = ", ".join(str(p) for p, _ in empty[:3]) + (", ..." if len(empty) > 3 else "")
        raise GuitarformerError(f"{len(empty)} of {len(riffs)} riffs came out empty, not written ({names}): {why}",
                                fix)
    return written


def _check_numbers(num_samples, batch_size, bars, max_new_tokens, seed, top_p, top_k, temperature, tempo) -> None:
    """The CLI checks its options; this says the same to callers of the Python API, before anything is loaded."""
    checks = [
        (num_samples >= 1, "num_samples must be at least 1", num_samples),
        (batch_size is None or batch_size >= 1, "batch_size must be at least 1", batch_size),
        (bars is None or bars >= 1, "bars must be at least 1 (new bars to write)", bars),
        (max_new_tokens is None or max_new_tokens >= 1, "max_new_tokens must be at least 1", max_new_tokens),
        (0 <= seed <= MAX_SEED, f"seed must be in 0..{MAX_SEED}", seed),
        (top_p is None or 0 < top_p <= 1, "top_p must be in (0, 1] (1 = off)", top_p),
        (top_k is None or top_k >= 0, "top_k must be 0 (off) or more", top_k),
        (temperature is None or (math.isfinite(temperature) and temperature >= 0),
         "temperature must be 0 (greedy) or more", temperature),
        (tempo is None or (math.isfinite(tempo) and tempo > 0), "tempo must be a positive number of BPM", tempo),
    ]
    for ok, what, value in checks:
        if not ok:
            raise GuitarformerError(f"{what}, not {value}", "see `guitarformer sample --help`")


def _ready_folder(path: Path, flag: str) -> None:
    """Create the folder a file goes into (as --out always did); a path that is a folder is an error."""
    if path.is_dir():
        raise GuitarformerError(f"{flag} {path} is a folder", f"give {flag} a file name, e.g. {path / 'riff'}"
                                + {"--out": ".mid", "--tab": ".txt", "--gp": ".gp5", "--wav": ".wav"}[flag])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GuitarformerError(f"cannot create the folder for {flag} {path}: {e.strerror or e}",
                                f"choose a {flag} path in a writable folder") from None


def _numbered(p: Path, i: int, n: int) -> Path:
    return p if n == 1 else p.with_name(f"{p.stem}_{i:03d}{p.suffix}")
