"""sample: KV-cached, batched, grammar- and guitar-constrained generation, and riffs rendered to MIDI + tab."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guitarformer.data.score import GUITAR_PROGRAM, MAX_FRET, STANDARD_TUNING, GuitarScore


# ---------------------------------------------------------------- constraints


class GuitarConstraint:
    """Next-token masks from the tokenizer's own grammar plus guitar limits.

    Grammar: miditok's `tokens_types_graph` says which token type may follow which, so every
    tokenization miditok offers is constrained without hand-written rules. Guitar: pitches outside
    the tuning's range are never allowed, and at most one note per string may start at one position
    (six strings: six notes). Works on ids; a tokenizer trained with BPE is left unconstrained.
    """

    def __init__(self, tokenizer, tuning: tuple[int, ...] = STANDARD_TUNING, capo: int = 0,
                 max_fret: int = MAX_FRET, device: torch.device | str = "cpu"):
        V = len(tokenizer)
        self.V, self.n_strings = V, len(tuning)
        self.enabled = not getattr(tokenizer, "is_trained", False)
        types = []
        for i in range(V):
            tok_str = tokenizer[i] if self.enabled else ""
            types.append(tok_str.split("_")[0] if isinstance(tok_str, str) else "")
        graph = getattr(tokenizer, "tokens_types_graph", {})
        lo, hi = min(tuning) + capo, max(tuning) + max_fret
        allowed_type = {t: set(graph.get(t, set())) for t in set(types)}
        type_ids: dict[str, list[int]] = {}
        for i, t in enumerate(types):
            type_ids.setdefault(t, []).append(i)
        M = torch.zeros(V, V, dtype=torch.bool)
        for t, nxt in allowed_type.items():
            cols = [j for nt in nxt for j in type_ids.get(nt.split("_")[0], [])]
            if cols:
                rows = torch.tensor(type_ids[t])
                M[rows.unsqueeze(1), torch.tensor(cols).unsqueeze(0)] = True
        never = {"PAD", "BOS", "MASK"}
        self.pitch = torch.zeros(V, dtype=torch.bool)
        self.resets = torch.zeros(V, dtype=torch.bool)  # tokens that move time on (a new onset)
        for i in range(V):
            t = types[i]
            if t in never:
                M[:, i] = False
            if t in ("Pitch", "PitchDrum", "NoteOn"):
                p = int(tokenizer[i].split("_")[1])
                self.pitch[i] = True
                if not lo <= p <= hi:
                    M[:, i] = False  # unplayable in this tuning
            if t in ("Position", "Bar", "TimeShift"):
                self.resets[i] = True
        self.bos, self.eos = tokenizer["BOS_None"], tokenizer["EOS_None"]
        # After BOS (or from scratch) a piece may start the way any real sequence starts.
        first_types = {"Bar", "TimeSig", "Position", "Tempo", "Pitch", "TimeShift", "Program"}
        M[self.bos] = False
        for t in first_types:
            for j in type_ids.get(t, []):
                M[self.bos, j] = not (self.pitch[j] and not (lo <= int(tokenizer[j].split("_")[1]) <= hi))
        self.allowed = M.to(device)
        self.pitch, self.resets = self.pitch.to(device), self.resets.to(device)
        self.notes_here: torch.Tensor | None = None

    def start(self, ids: torch.Tensor) -> None:
        """Initialise per-row state from the prompt (B, T)."""
        B = ids.shape[0]
        self.notes_here = torch.zeros(B, dtype=torch.long, device=ids.device)
        for t in range(ids.shape[1]):
            self.update(ids[:, t])

    def update(self, new: torch.Tensor) -> None:
        """Advance the state with the tokens just chosen (B,)."""
        assert self.notes_here is not None
        self.notes_here = torch.where(self.resets[new], torch.zeros_like(self.notes_here),
                                      self.notes_here + self.pitch[new].long())

    def mask(self, last: torch.Tensor) -> torch.Tensor:
        """(B, V) bool: True where the next token is allowed."""
        if not self.enabled:
            return torch.ones(last.shape[0], self.V, dtype=torch.bool, device=last.device)
        m = self.allowed[last].clone()
        full = self.notes_here >= self.n_strings
        if full.any():
            m[full] &= ~self.pitch
        m[~m.any(1), self.eos] = True  # a dead end can always finish
        return m


# ---------------------------------------------------------------- generation


def _filter_logits(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    logits = logits / max(temperature, 1e-8)
    if top_k:
        k = min(int(top_k), logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(-1) - probs > top_p  # keep the smallest set whose mass reaches top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                generator: torch.Generator | None = None, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from last-position logits (B, V); temperature 0 is greedy."""
    logits = logits.float()
    if allowed is not None:
        logits = logits.masked_fill(~allowed, float("-inf"))
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(_filter_logits(logits, temperature, top_k, top_p), dim=-1)
    if generator is not None and generator.device != probs.device:  # a CPU generator: draw on CPU (reproducible)
        return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, generator: torch.Generator | None = None, use_cache: bool = True,
             constraint: GuitarConstraint | None = None, eos_id: int | None = None, max_bars: int | None = None,
             bar_ids: list[int] | None = None, src: torch.Tensor | None = None,
             src_key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Continue prompt_ids (B, T0) by up to max_new_tokens; returns (B, T0 + n) ids.

    Decoder: the prompt is the context. Encoder-decoder: pass `src` (B, S); the prompt starts the target
    (usually [BOS]). Rows that reach EOS (or finish `max_bars` bars) are padded with EOS afterwards.
    Past the context length the window slides: the cache is rebuilt from the last half of the context.
    """
    model.eval()
    device = next(model.parameters()).device
    idx = torch.as_tensor(prompt_ids, dtype=torch.long, device=device)
    if idx.dim() == 1:
        idx = idx.unsqueeze(0)
    B = idx.shape[0]
    ctx = model.config.block_size
    is_encdec = src is not None
    memory = None
    if is_encdec:
        src = torch.as_tensor(src, dtype=torch.long, device=device)
        memory = model.encode(src, src_key_mask)
    if constraint is not None:
        constraint.start(idx)
    bar_t = torch.tensor(bar_ids or [], dtype=torch.long, device=device)
    bars_seen = torch.zeros(B, dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)

    def run(tokens: torch.Tensor, cache):
        if is_encdec:
            return model.decode(tokens, memory, src_key_mask, cache=cache)
        return model(tokens, cache=cache)[0]

    cache = None
    window = idx[:, -ctx:]
    if use_cache:
        cache = model.new_cache(B, ctx, device=device)
        logits = run(window, cache)[:, -1]
    for _ in range(max_new_tokens):
        if not use_cache:
            logits = run(idx[:, -ctx:], None)[:, -1]
        allowed = constraint.mask(idx[:, -1]) if constraint is not None else None
        nxt = sample_next(logits, temperature, top_k, top_p, generator, allowed)
        if eos_id is not None:
            nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
        if max_bars is not None and bar_t.numel():
            is_bar = torch.isin(nxt, bar_t) & ~done
            bars_seen += is_bar.long()
            over = bars_seen > max_bars
            if eos_id is not None:
                nxt = torch.where(over, torch.full_like(nxt, eos_id), nxt)
            done |= over
        if eos_id is not None:
            done |= nxt == eos_id
        idx = torch.cat([idx, nxt.unsqueeze(1)], dim=1)
        if constraint is not None:
            constraint.update(nxt)
        if done.all():
            break
        if use_cache:
            if cache.length >= ctx:  # context full: slide, rebuild the cache from the last half
                cache = model.new_cache(B, ctx, device=device)
                logits = run(idx[:, -(ctx // 2):], cache)[:, -1]
            else:
                logits = run(nxt.unsqueeze(1), cache)[:, -1]
    return idx


# ---------------------------------------------------------------- riffs


@dataclass
class Riff:
    ids: list[int]
    gs: GuitarScore
    frets: list[tuple[int, int]] = field(default_factory=list)


def load_run(run: str | Path | None = None, checkpoint: str | Path | None = None, device: str = "cpu"):
    """(model, tokenizer, cfg) from a run directory (best, else last checkpoint) or a checkpoint file."""
    from guitarformer.checkpoint import load_checkpoint
    from guitarformer.config import from_dict
    from guitarformer.data.tokenization import load_tokenizer
    from guitarformer.errors import GuitarformerError
    from guitarformer.models import build_model
    from guitarformer.train import newest_run

    if checkpoint is None:
        run_dir = Path(run) if run else newest_run()
        ck = run_dir / "ckpt" / "best.pt"
        if not ck.is_file():
            ck = run_dir / "ckpt" / "last.pt"
        if not ck.is_file():
            raise GuitarformerError(f"run {run_dir} has no checkpoint (ckpt/best.pt or ckpt/last.pt)",
                                    "train it first, or pass --checkpoint FILE")
    else:
        ck = Path(checkpoint)
        run_dir = ck.parent.parent
    state = load_checkpoint(ck)
    cfg = from_dict(state["config"])
    tok_path = run_dir / "tokenizer.json"
    if not tok_path.is_file():
        raise GuitarformerError(f"no tokenizer.json beside {ck}", "keep checkpoints inside their run directory (ckpt/..)")
    tokenizer = load_tokenizer(tok_path)
    model = build_model(cfg.model)
    model.load_state_dict(state["model"])
    model.to(device).eval()
    return model, tokenizer, cfg


def generate_riffs(model, tokenizer, cfg, device="cpu", num: int = 1, seed: int = 0, max_new_tokens: int = 512,
                   temperature: float = 1.0, top_k: int | None = None, top_p: float | None = 0.95,
                   prompt: list[int] | None = None, bars: int | None = None,
                   tuning: tuple[int, ...] = STANDARD_TUNING, tempo: float | None = None,
                   program: int = GUITAR_PROGRAM, use_cache: bool = True) -> list[Riff]:
    """Sample `num` riffs in one batch. A decoder continues `prompt` (ids, BOS first); an encoder-decoder
    encodes it as the source and writes the continuation. Returns decoded, fretted riffs."""
    from guitarformer.data.tokenization import bar_ids, decode, special_ids

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
        frets = fret_score(gs)
        gs.frets = frets
        riffs.append(Riff(ids=row, gs=gs, frets=frets))
    return riffs


def clamp_to_tuning(score, tuning: tuple[int, ...]):
    """Lenient repair: notes outside the tuning's range move by octaves into it; at most len(tuning) notes
    start together (the highest-velocity ones kept)."""
    import symusic

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


def fret_score(gs: GuitarScore) -> list[tuple[int, int]]:
    from guitarformer.tab import fret

    return fret(list(gs.track.notes), gs.tuning, gs.capo)


def render_media(riff: Riff, fs: int = 16000) -> dict[str, Any]:
    """Piano roll (H, W uint8), audio (float32 in [-1, 1]) and ASCII tab of a riff, for TensorBoard."""
    import pretty_midi

    pm = pretty_midi.PrettyMIDI(io.BytesIO(riff.gs.score.dumps_midi()))
    roll = pm.get_piano_roll(fs=16)[28:100][::-1]  # guitar-ish range, high notes on top
    img = (np.clip(roll / 127.0, 0, 1) * 255).astype(np.uint8) if roll.size else np.zeros((72, 1), np.uint8)
    audio = None
    if pm.instruments and pm.instruments[0].notes:
        audio = pm.synthesize(fs=fs).astype(np.float32)[: fs * 30]
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        audio = (audio / peak * 0.9 if peak > 0 else audio).reshape(1, -1)
    from guitarformer.tab import render_ascii_tab

    return {"piano_roll": img, "audio": audio, "sample_rate": fs, "tab": render_ascii_tab(riff.gs, riff.frets)}


def generate_riff(model, tokenizer, cfg, device, seed: int = 0, max_new_tokens: int = 256) -> Riff:
    s = cfg.sample
    return generate_riffs(model, tokenizer, cfg, device, 1, seed, max_new_tokens, s.temperature, s.top_k or None,
                          s.top_p)[0]


def parse_tuning(spec: str) -> tuple[int, ...]:
    """A tuning name (standard, drop-d, ...) or MIDI numbers low to high ("38,45,50,55,59,64")."""
    from guitarformer.data.score import TUNINGS
    from guitarformer.errors import GuitarformerError

    key = spec.strip().lower().replace("_", "-").replace(" ", "-")
    if key in TUNINGS:
        return TUNINGS[key]
    try:
        notes = tuple(int(x) for x in spec.split(","))
    except ValueError:
        notes = ()
    if not 4 <= len(notes) <= 8 or not all(20 <= n <= 90 for n in notes):
        raise GuitarformerError(f"unknown tuning {spec!r}",
                                f"use one of {', '.join(TUNINGS)} or MIDI numbers low to high, e.g. 38,45,50,55,59,64")
    return tuple(sorted(notes))


def prompt_ids(tokenizer, path: Path) -> list[int]:
    """Token ids (BOS, no EOS) of the first guitar part of a MIDI/GP/tab/MusicXML file."""
    from guitarformer.data.io import read_guitar
    from guitarformer.data.tokenization import encode
    from guitarformer.errors import GuitarformerError

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
                echo=print) -> list[Path]:
    """The `sample` command: load, generate in one batch, write MIDI (+ tab, GP5), report."""
    from guitarformer.data.io import write_midi
    from guitarformer.errors import GuitarformerError
    from guitarformer.tab import write_ascii_tab, write_gp5
    from guitarformer.train import resolve_device

    out = Path(out)
    if out.suffix.lower() not in (".mid", ".midi"):
        raise GuitarformerError(f"--out {out} should be a MIDI file", "give it a .mid extension, e.g. --out riff.mid")
    dev = resolve_device(device)
    model, tokenizer, cfg = load_run(run_dir, checkpoint, str(dev))
    s = cfg.sample
    tun = parse_tuning(tuning)
    p_ids = prompt_ids(tokenizer, prompt) if prompt else None
    if p_ids and cfg.model.kind == "decoder":
        p_ids = p_ids[-(cfg.model.block_size // 2):]
    riffs = generate_riffs(
        model, tokenizer, cfg, dev, num_samples, seed, max_new_tokens or s.max_new_tokens,
        s.temperature if temperature is None else temperature, (s.top_k if top_k is None else top_k) or None,
        s.top_p if top_p is None else top_p, p_ids, bars, tun, tempo, program if program is not None else GUITAR_PROGRAM)
    out.parent.mkdir(parents=True, exist_ok=True)
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
        notes = list(r.gs.track.notes)
        score = r.gs.score
        n_bars = _count_bars(score)
        rng = f"{_name(min(n.pitch for n in notes))}-{_name(max(n.pitch for n in notes))}" if notes else "-"
        echo(f"{path}: {n_bars} bars, {len(notes)} notes, range {rng}" + (f"; {', '.join(extra)}" if extra else ""))
    return written


def _numbered(p: Path, i: int, n: int) -> Path:
    return p if n == 1 else p.with_name(f"{p.stem}_{i:03d}{p.suffix}")


def _count_bars(score) -> int:
    end = score.end()
    if end <= 0:
        return 0
    num, den = (score.time_signatures[0].numerator, score.time_signatures[0].denominator) if score.time_signatures else (4, 4)
    return int(np.ceil(end / (score.ticks_per_quarter * 4 * num / den)))


def _name(pitch: int) -> str:
    names = ["C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B"]
    return f"{names[pitch % 12]}{pitch // 12 - 1}"
