"""Riffs: sample from a run, decode, finger and write them (the `sample` command)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import symusic
import torch

from guitarformer.data.tokenization import bar_ids, decode, encode, special_ids
from guitarformer.errors import GuitarformerError
from guitarformer.fretting import fret
from guitarformer.generation.constraint import GuitarConstraint
from guitarformer.generation.engine import generate
from guitarformer.music.guitar import GUITAR_PROGRAM, MAX_FRET, STANDARD_TUNING, parse_tuning, pitch_name
from guitarformer.music.score import GuitarScore
from guitarformer.readers import read_guitar
from guitarformer.render.ascii_tab import write_ascii_tab
from guitarformer.render.audio import find_synth, render_wav
from guitarformer.render.gp5 import write_gp5
from guitarformer.render.midi import write_midi
from guitarformer.runs import load_run
from guitarformer.runtime import resolve_device


@dataclass
class Riff:
    ids: list[int]
    gs: GuitarScore
    frets: list[tuple[int, int]] = field(default_factory=list)


def generate_riffs(model, tokenizer, cfg, device="cpu", num: int = 1, seed: int = 0, max_new_tokens: int = 512,
                   temperature: float = 1.0, top_k: int | None = None, top_p: float | None = 0.95,
                   prompt: list[int] | None = None, bars: int | None = None,
                   tuning: tuple[int, ...] = STANDARD_TUNING, tempo: float | None = None,
                   program: int = GUITAR_PROGRAM, use_cache: bool = True, position: int | None = None) -> list[Riff]:
    """Sample `num` riffs in one batch. A decoder continues `prompt` (ids, BOS first); an encoder-decoder
    encodes it as the source and writes the continuation. Returns decoded, fretted riffs (in `position` if given,
    see `tab.fret`)."""

    sp = special_ids(tokenizer)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    constraint = GuitarConstraint(tokenizer, tuning, device=device)
    is_encdec = cfg.model.kind == "encoder_decoder"
    if is_encdec:
        src_ids = list(prompt or [sp["bos"]])[-cfg.model.src_block_size:]
        src = torch.tensor([src_ids] * num, dtype=torch.long)
        start = torch.full((num, 1), sp["bos"], dtype=torch.long)
        kw = {"src": src.to(device), "src_key_mask": torch.ones_like(src, dtype=torch.bool).to(device)}
    else:
        src_ids = []
        start = torch.tensor([list(prompt or [sp["bos"]])] * num, dtype=torch.long)
        kw = {}
    # The generator lives on CPU, so the same seed gives the same riff on every device.
    out = generate(model, start.to(device), max_new_tokens, temperature, top_k, top_p, gen, use_cache,
                   constraint, sp["eos"], bars, bar_ids(tokenizer), **kw)
    riffs = []
    for row in out.tolist():
        body = row if not is_encdec else src_ids + row  # the continuation is heard after its source
        score = decode(tokenizer, body, program=program, tempo=tempo)
        score = clamp_to_tuning(score, tuning)
        gs = GuitarScore(score=score, tuning=tuple(tuning), name="riff", source_format="generated")
        frets = fret_score(gs, position)
        gs.frets = frets
        riffs.append(Riff(ids=row, gs=gs, frets=frets))
    return riffs


def clamp_to_tuning(score, tuning: tuple[int, ...]):
    """Lenient repair: notes outside the tuning's range move by octaves into it; at most len(tuning) notes
    start together (the highest-velocity ones kept)."""

    lo, hi = min(tuning), max(tuning) + MAX_FRET
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


def prompt_ids(tokenizer, path: Path) -> list[int]:
    """Token ids (BOS, no EOS) of the first guitar part of a MIDI/GP/tab/MusicXML file."""

    if not Path(path).is_file():
        raise GuitarformerError(f"prompt file {path} does not exist", "pass a MIDI, Guitar Pro, tab or MusicXML file")
    try:
        parts = read_guitar(Path(path))
        ids = encode(tokenizer, parts[0])[:-1] if parts else []
    except Exception as e:
        raise GuitarformerError(f"prompt {path} is not readable music ({type(e).__name__}: {e})",
                                "pass a MIDI, Guitar Pro (gp3-5), ASCII tab or MusicXML file with notes") from None
    if len(ids) <= 1:
        raise GuitarformerError(f"prompt {path} has no notes", "pass a file with a guitar part that has notes")
    return ids


def write_riffs(out: Path, run_dir=None, checkpoint=None, num_samples: int = 1, max_new_tokens=None, bars=None,
                temperature=None, top_k=None, top_p=None, seed: int = 0, prompt=None, tempo=None,
                tuning: str = "standard", program=None, tab_out=None, gp_out=None, device: str = "auto",
                echo=print, batch_size: int | None = None, wav_out=None, position: int | None = None) -> list[Path]:
    """The `sample` command: load, generate in batches of `batch_size`, write MIDI (+ tab, GP5, WAV), report.

    Batch k (0-based) is seeded with seed + k, so a run is reproducible for a given batch size."""

    out = Path(out)
    if out.suffix.lower() not in (".mid", ".midi"):
        raise GuitarformerError(f"--out {out} should be a MIDI file", "give it a .mid extension, e.g. --out riff.mid")
    synth = find_synth() if wav_out else None  # fail before the slow part
    dev = resolve_device(device)
    model, tokenizer, cfg = load_run(run_dir, checkpoint, str(dev))
    s = cfg.sample
    tun = parse_tuning(tuning)
    p_ids = prompt_ids(tokenizer, prompt) if prompt else None
    if p_ids and cfg.model.kind == "decoder":
        p_ids = p_ids[-(cfg.model.block_size // 2):]
    bs = max(1, min(batch_size or num_samples, num_samples))
    riffs: list[Riff] = []
    for k, first in enumerate(range(0, num_samples, bs)):
        riffs += generate_riffs(
            model, tokenizer, cfg, dev, min(bs, num_samples - first), seed + k, max_new_tokens or s.max_new_tokens,
            s.temperature if temperature is None else temperature, (s.top_k if top_k is None else top_k) or None,
            s.top_p if top_p is None else top_p, p_ids, bars, tun, tempo,
            program if program is not None else GUITAR_PROGRAM, position=position)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GuitarformerError(f"cannot create the folder for {out}: {e.strerror or e}",
                                "choose an --out path in a writable folder") from None
    written = []
    for i, r in enumerate(riffs):
        path = _numbered(out, i, len(riffs))
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
        if wav_out:
            wp = _numbered(Path(wav_out), i, len(riffs))
            render_wav(path, wp, synth)
            extra.append(str(wp))
        notes = list(r.gs.track.notes)
        score = r.gs.score
        n_bars = _count_bars(score)
        rng = f"{pitch_name(min(n.pitch for n in notes))}-{pitch_name(max(n.pitch for n in notes))}" if notes else "-"
        echo(f"{path}: {n_bars} bars, {len(notes)} notes, range {rng}" + (f"; {', '.join(extra)}" if extra else ""))
    return written


def _numbered(p: Path, i: int, n: int) -> Path:
    return p if n == 1 else p.with_name(f"{p.stem}_{i:03d}{p.suffix}")


def _count_bars(score) -> int:
    """Bars up to the score's end, following its time signatures (4/4 before the first)."""
    end = score.end()
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures)
    tick, bars, num, den = 0, 0, 4, 4
    while tick < end:
        for t, a, b in sigs:
            if t <= tick:
                num, den = a, b
        tick += max(1, score.ticks_per_quarter * 4 * num // den)
        bars += 1
    return bars
