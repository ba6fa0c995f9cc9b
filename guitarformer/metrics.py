"""metrics: is a model any good? Likelihood (vs a Kneser-Ney floor), musical statistics of samples vs real
music (overlapping areas), and guitar playability. `evaluate_run` is the `guitarformer eval` command."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from guitarformer import IGNORE_INDEX

# ---------------------------------------------------------------- likelihood


def _ce_stats(logits, y) -> tuple[float, int, int]:
    import torch.nn.functional as F

    logits = logits.float()
    nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX, reduction="sum").item()
    valid = y != IGNORE_INDEX
    return nll, int(((logits.argmax(-1) == y) & valid).sum().item()), int(valid.sum().item())


def _summary(nll: float, correct: int, count: int) -> dict[str, float]:
    loss = nll / max(count, 1)
    return {"nll": loss, "ppl": math.exp(min(loss, 50.0)), "accuracy": correct / max(count, 1), "tokens": count}


def continuation_nll(model, kind: str, pairs, device, batch_size: int = 16) -> dict[str, float]:
    """NLL/perplexity/accuracy on the target tokens of Seq2SeqPairs, for either model kind.

    Encoder-decoder: source through the encoder, target teacher-forced after BOS. Decoder: the source tokens
    are the prefix, the target follows, and only target positions are scored — the same tokens either way.
    """
    import torch

    model.eval()
    nll, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for src, mask, tgt, y in pairs.eval_batches(batch_size):
            if kind == "decoder":
                rows, ys = [], []
                for s, m, t in zip(src, mask, y):
                    s, t = s[m], t[t != IGNORE_INDEX]
                    inp = torch.cat([s, t])[:-1]
                    tt = torch.full_like(inp, IGNORE_INDEX)
                    tt[len(s) - 1:] = t  # position len(s)-1 (last source token) predicts the first target token
                    rows.append(inp)
                    ys.append(tt)
                L = max(len(r) for r in rows)
                x = torch.zeros(len(rows), L, dtype=torch.long)
                yy = torch.full((len(rows), L), IGNORE_INDEX, dtype=torch.long)
                for i, (r, t) in enumerate(zip(rows, ys)):  # right padding: causal attention never sees it
                    x[i, : len(r)] = r
                    yy[i, : len(t)] = t
                logits, _ = model(x.to(device))
                a, b, c = _ce_stats(logits, yy.to(device))
            else:
                logits, _ = model(src.to(device), tgt.to(device), src_key_mask=mask.to(device))
                a, b, c = _ce_stats(logits, y.to(device))
            nll, correct, count = nll + a, correct + b, count + c
    return _summary(nll, correct, count)


def stream_nll(model, part, block_size: int, device, batch_size: int = 16) -> dict[str, float]:
    """Decoder NLL over a split's concatenated tokens in consecutive windows (as training validates)."""
    import torch

    from guitarformer.data.dataset import DecoderWindows

    model.eval()
    nll, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in DecoderWindows(part, block_size).eval_batches(batch_size):
            logits, _ = model(x.to(device))
            a, b, c = _ce_stats(logits, y.to(device))
            nll, correct, count = nll + a, correct + b, count + c
    return _summary(nll, correct, count)


def ngram_continuation(lm, pairs) -> dict[str, float]:
    """The n-gram's NLL on the same target tokens as `continuation_nll`."""
    nll, correct, count = 0.0, 0, 0
    for src, mask, _, y in pairs.eval_batches(64):
        for s, m, t in zip(src.numpy(), mask.numpy(), y.numpy()):
            s, t = s[m], t[t != IGNORE_INDEX]
            r = lm.score(np.concatenate([s, t]), start=len(s), accuracy=True)
            nll += r["nll"] * r["tokens"]
            correct += round(r["accuracy"] * r["tokens"])
            count += r["tokens"]
    return _summary(nll, correct, count)


# ---------------------------------------------------------------- musical features


@dataclass
class Piece:
    """Notes of one piece (or segment) in quarter notes, with its bar length and the (string, fret) a human
    gave them where the source knows it."""

    onset: np.ndarray  # (N,) quarters
    duration: np.ndarray  # (N,) quarters
    pitch: np.ndarray  # (N,) MIDI
    bar: float = 4.0  # quarters per bar
    length: float = 0.0  # quarters; 0 = end of the last note
    frets: list[tuple[int, int]] | None = None
    tuning: tuple[int, ...] = (40, 45, 50, 55, 59, 64)
    capo: int = 0
    program: int | None = None  # General MIDI program of the (first) track: picks tab.fret's costs

    @property
    def span(self) -> float:
        end = float((self.onset + self.duration).max()) if len(self.onset) else 0.0
        return max(self.length or end, 1.0)


def piece_of(score, tuning=None, capo: int = 0, frets=None) -> Piece:
    """A Piece from a symusic Score (all tracks' notes) in quarter notes."""
    tpq = score.ticks_per_quarter
    on, du, pi = [], [], []
    for tr in score.tracks:
        a = tr.notes.numpy()
        on.append(a["time"]), du.append(a["duration"]), pi.append(a["pitch"])
    on = np.concatenate(on).astype(np.float64) / tpq if on else np.zeros(0)
    du = np.concatenate(du).astype(np.float64) / tpq if du else np.zeros(0)
    pi = np.concatenate(pi).astype(np.int64) if pi else np.zeros(0, np.int64)
    bar = 4.0
    if len(score.time_signatures):
        ts = score.time_signatures[0]
        bar = ts.numerator * 4.0 / ts.denominator
    p = Piece(on, du, pi, bar=bar, frets=frets, capo=capo, program=score.tracks[0].program if len(score.tracks) else None)
    if tuning:
        p.tuning = tuple(tuning)
    return p


def segments(p: Piece, length: float, max_segments: int = 4) -> list[Piece]:
    """Consecutive `length`-quarter segments of a piece (at most max_segments, each with >= 2 notes)."""
    out = []
    k = 0
    while k < max_segments and k * length < p.span:
        a, b = k * length, (k + 1) * length
        m = (p.onset >= a) & (p.onset < b)
        if m.sum() >= 2:
            out.append(Piece(p.onset[m] - a, p.duration[m], p.pitch[m], p.bar, length, None, p.tuning, p.capo, p.program))
        k += 1
    return out


MAJOR = np.array([0, 2, 4, 5, 7, 9, 11])
HARMONIC_MINOR = np.array([0, 2, 3, 5, 7, 8, 11])  # natural minor is a rotation of major: add harmonic minor


def pitch_class_entropy(p: Piece) -> float:
    """Shannon entropy (bits) of the pitch-class histogram: 0 = one pitch class, log2(12) = 3.58 = all equal."""
    h = np.bincount(p.pitch % 12, minlength=12).astype(np.float64)
    q = h[h > 0] / h.sum()
    return float(-(q * np.log2(q)).sum()) if h.sum() else math.nan


def pitch_range(p: Piece) -> float:
    return float(p.pitch.max() - p.pitch.min()) if len(p.pitch) else math.nan


def used_pitch_classes(p: Piece) -> float:
    return float(len(np.unique(p.pitch % 12))) if len(p.pitch) else math.nan


def scale_consistency(p: Piece) -> float:
    """Largest share of notes inside one major or harmonic-minor scale (any of the 24 keys)."""
    if not len(p.pitch):
        return math.nan
    pc = p.pitch % 12
    best = 0.0
    for scale in (MAJOR, HARMONIC_MINOR):
        for root in range(12):
            best = max(best, float(np.isin(pc, (scale + root) % 12).mean()))
    return best


def note_density(p: Piece) -> float:
    """Notes per quarter note."""
    return len(p.pitch) / p.span if len(p.pitch) else math.nan


def inter_onset_interval(p: Piece) -> float:
    """Mean time between consecutive distinct onsets, in quarter notes."""
    t = np.unique(np.round(p.onset, 4))
    return float(np.diff(t).mean()) if len(t) >= 2 else math.nan


def polyphony(p: Piece) -> float:
    """Mean number of notes sounding at each onset (1 = monophonic)."""
    t = np.unique(p.onset)
    if not len(t):
        return math.nan
    end = p.onset + np.maximum(p.duration, 1e-6)
    return float(np.mean([((p.onset <= x) & (end > x)).sum() for x in t]))


def groove_consistency(p: Piece, grid: int = 12) -> float:
    """1 - mean Hamming distance between consecutive bars' onset patterns (1/12-quarter grid), per grid cell."""
    res = max(1, int(round(p.bar * grid)))
    n_bars = int(math.ceil(p.span / p.bar - 1e-9))
    if n_bars < 2:
        return math.nan
    pat = np.zeros((n_bars, res), dtype=bool)
    cell = np.round(p.onset * grid).astype(np.int64)
    b, c = cell // res, cell % res
    ok = b < n_bars
    pat[b[ok], c[ok]] = True
    return float(1.0 - (pat[1:] != pat[:-1]).sum(1).mean() / res)


FEATURES: dict[str, Callable[[Piece], float]] = {
    "pitch_class_entropy": pitch_class_entropy,
    "pitch_range": pitch_range,
    "used_pitch_classes": used_pitch_classes,
    "scale_consistency": scale_consistency,
    "note_density": note_density,
    "inter_onset_interval": inter_onset_interval,
    "polyphony": polyphony,
    "groove_consistency": groove_consistency,
}


def features(pieces: Sequence[Piece]) -> dict[str, np.ndarray]:
    """Per-piece values of every feature (NaN where a piece is too short for it)."""
    return {k: np.array([f(p) for p in pieces], dtype=np.float64) for k, f in FEATURES.items()}


def overlap_area(a: Sequence[float], b: Sequence[float], points: int = 4096) -> float:
    """Overlapping area of two 1-D distributions (Gaussian KDEs of the values, Scott's bandwidth): 1 = the
    same distribution, 0 = disjoint. NaNs are dropped; fewer than 2 values on either side gives NaN."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 2 or len(b) < 2:
        return math.nan
    both = np.concatenate([a, b])
    lo, hi = both.min(), both.max()
    if hi - lo < 1e-12:
        return 1.0
    floor = (hi - lo) / 500  # a constant set is a narrow bump, not a spike the grid cannot see

    def bw(x):
        return max(1.06 * x.std(ddof=1) * len(x) ** -0.2, floor)

    ha, hb = bw(a), bw(b)
    grid = np.linspace(lo - 4 * max(ha, hb), hi + 4 * max(ha, hb), points)

    def kde(x, h):
        d = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / h) ** 2).sum(1)
        return d / np.trapezoid(d, grid)

    return float(min(1.0, np.trapezoid(np.minimum(kde(a, ha), kde(b, hb)), grid)))


def compare(samples: Sequence[Piece], reference: Sequence[Piece], seed: int = 0) -> dict[str, dict[str, float]]:
    """Per feature: mean/std on both sets, OA(samples, reference) and the ceiling OA(reference half, other half)."""
    fs, fr = features(samples), features(reference)
    order = np.random.default_rng(seed).permutation(len(reference))
    h1, h2 = order[: len(order) // 2], order[len(order) // 2:]
    out = {}
    for k in FEATURES:
        s, r = fs[k], fr[k]
        out[k] = {"samples_mean": float(np.nanmean(s)) if np.isfinite(s).any() else math.nan,
                  "samples_std": float(np.nanstd(s)) if np.isfinite(s).any() else math.nan,
                  "reference_mean": float(np.nanmean(r)) if np.isfinite(r).any() else math.nan,
                  "reference_std": float(np.nanstd(r)) if np.isfinite(r).any() else math.nan,
                  "oa": overlap_area(s, r), "oa_ceiling": overlap_area(r[h1], r[h2])}
    return out


# ---------------------------------------------------------------- playability


def _onset_groups(p: Piece, frets: Sequence[tuple[int, int]]) -> list[list[int]]:
    groups: dict[float, list[int]] = {}
    for i, t in enumerate(np.round(p.onset, 4)):
        groups.setdefault(float(t), []).append(frets[i][1])
    return [groups[t] for t in sorted(groups)]


def playability(pieces: Sequence[Piece], max_span: int = 4, window: int = 4) -> dict[str, float]:
    """Share of notes `tab.fret` can place in the tuning, share of chords whose fretted notes span at most
    `max_span` frets (5 frets under the hand), and hand-position shifts per bar (a shift = a note outside the
    current `window`-fret position)."""
    from guitarformer.tab import UNPLAYABLE, fret

    notes = placed = chords = ok_chords = shifts = 0
    bars = 0.0
    for p in pieces:
        ticks = [(int(round(o * 480)), max(1, int(round(d * 480))), int(x)) for o, d, x in
                 zip(p.onset, p.duration, p.pitch)]
        fr = fret(ticks, p.tuning, p.capo, program=p.program)
        notes += len(fr)
        placed += sum(f != UNPLAYABLE for f in fr)
        pos = None
        for g in _onset_groups(p, fr):
            fretted = [f for f in g if f > 0]
            if len([f for f in g if f >= 0]) >= 2 and fretted:
                chords += 1
                ok_chords += max(fretted) - min(fretted) <= max_span
            if not fretted:
                continue
            lo, hi = min(fretted), max(fretted)
            if pos is None:
                pos = lo
            elif lo < pos or hi > pos + window - 1:
                shifts += 1
                pos = lo if lo < pos else max(lo, hi - window + 1)
        bars += p.span / p.bar
    return {"fretable": placed / max(notes, 1), "chord_stretch_ok": ok_chords / chords if chords else math.nan,
            "shifts_per_bar": shifts / max(bars, 1e-9), "notes": notes, "chords": chords}


def fingering_agreement(pieces: Sequence[Piece]) -> dict[str, float]:
    """Share of notes where `tab.fret` picks the same (string, fret) as the human tab (pieces with frets only)."""
    from guitarformer.tab import UNPLAYABLE, fret

    same = total = files = 0
    for p in pieces:
        if not p.frets or len(p.frets) != len(p.pitch):
            continue
        ticks = [(int(round(o * 480)), max(1, int(round(d * 480))), int(x)) for o, d, x in
                 zip(p.onset, p.duration, p.pitch)]
        ours = fret(ticks, p.tuning, p.capo, program=p.program)
        files += 1
        for h, o in zip(p.frets, ours):
            if tuple(h) != UNPLAYABLE:
                total += 1
                same += tuple(h) == tuple(o)
    return {"agreement": same / total if total else math.nan, "notes": total, "pieces": files}


# ---------------------------------------------------------------- reference sets


def reference_from_split(dataset: Path, split: str, tokenizer) -> list[Piece]:
    """The split's sequences decoded back to music through the tokenizer."""
    from guitarformer.data.dataset import TokenSplit
    from guitarformer.data.tokenization import decode

    part = TokenSplit(dataset, split)
    return [piece_of(decode(tokenizer, part.sequence(i).tolist())) for i in range(part.num_sequences)]


def _fretted_only(gs) -> list[tuple[int, int]] | None:
    """The part's human frets with natural harmonics marked unplayable: their string/fret names a node to touch,
    not a fretted pitch, so `fingering_agreement` leaves them out (as scripts/bench_fretting.py does)."""
    if not gs.frets:
        return gs.frets
    from guitarformer.tab import UNPLAYABLE

    harmonics = set(gs.extra.get("harmonics", ()))
    return [UNPLAYABLE if i in harmonics else f for i, f in enumerate(gs.frets)]


def reference_from_dir(folder: Path, limit: int = 500) -> tuple[list[Piece], int]:
    """Every readable guitar part under a folder (read_guitar), with human frets where the file has them.
    Returns (pieces, files skipped)."""
    from guitarformer.data.io import detect_format, read_guitar

    pieces, skipped = [], 0
    files = sorted(f for f in Path(folder).rglob("*") if f.is_file() and detect_format(f))
    for f in files[:limit]:
        try:
            parts = read_guitar(f)
        except Exception:  # unreadable or not guitar: a reference set is best effort
            skipped += 1
            continue
        for gs in parts:
            if len(gs.track.notes) >= 2:
                pieces.append(piece_of(gs.score, gs.tuning, gs.capo, _fretted_only(gs)))
    return pieces, skipped


# ---------------------------------------------------------------- the eval command


def evaluate_run(run_dir: Path | None, data: Path | None = None, split: str = "test", device: str = "auto",
                 reference: Path | None = None, num_samples: int = 32, max_new_tokens: int | None = None,
                 samples: bool = True, ngram_order: int = 5, cont_src: int | None = None,
                 cont_tgt: int | None = None, seed: int = 0, progress: Callable[[str], Any] | None = None) -> dict:
    """Everything `guitarformer eval` reports for a run, as a nested dict (see docs/EVAL.md)."""
    import json
    import time

    import torch

    from guitarformer.data.dataset import Seq2SeqPairs, TokenSplit
    from guitarformer.data.prepare import load_meta
    from guitarformer.data.tokenization import bar_ids
    from guitarformer.errors import GuitarformerError
    from guitarformer.ngram import KneserNey
    from guitarformer.sample import load_run
    from guitarformer.train import newest_run, resolve_device

    say = progress or (lambda s: None)
    dev = resolve_device(device)
    run_dir = Path(run_dir) if run_dir else newest_run()
    model, tokenizer, cfg = load_run(run_dir, None, str(dev))
    dataset = Path(data) if data else Path(cfg.data.dataset)
    meta = load_meta(dataset)
    if meta["tokens"].get(split, 0) < 2:
        raise GuitarformerError(f"the {split} split of {dataset} is empty", "evaluate on --split val, or prepare more files")
    if len(tokenizer) != cfg.model.vocab_size:
        raise GuitarformerError(f"the run's vocabulary ({cfg.model.vocab_size}) does not match {dataset}'s tokenizer",
                                "evaluate on the dataset the run was trained on (--data)")
    kind, m = cfg.model.kind, cfg.model
    summ = run_dir / "summary.json"
    step = json.loads(summ.read_text()).get("step", 0) if summ.is_file() else 0
    res: dict[str, Any] = {"run": str(run_dir), "kind": kind, "dataset": str(dataset), "split": split, "step": step}
    part = TokenSplit(dataset, split)
    bs = cfg.train.batch_size
    V = len(tokenizer)

    # Continuation lengths: what the encoder-decoder was trained on; a decoder fits source + target in its context.
    if kind == "decoder":
        S = cont_src or min(m.src_block_size, m.block_size // 2)
        T = cont_tgt or m.block_size - S + 1
        if S + T - 1 > m.block_size:
            raise GuitarformerError(f"continuation source {S} + target {T} tokens exceed the decoder's context "
                                    f"{m.block_size}", "lower --cont-src / --cont-tgt")
    else:
        S, T = cont_src or m.src_block_size, cont_tgt or m.block_size
        if S > m.src_block_size or T > m.block_size:
            raise GuitarformerError(f"continuation {S}/{T} tokens exceed the model's {m.src_block_size}/{m.block_size}",
                                    "lower --cont-src / --cont-tgt")
    pairs = Seq2SeqPairs(part, S, T, bar_ids(tokenizer), tokenizer["BOS_None"], tokenizer.pad_token_id)

    t0 = time.time()
    say(f"likelihood on {split} ({len(part):,} tokens)")
    if kind == "decoder":
        res["likelihood"] = {"scope": "stream", **stream_nll(model, part, m.block_size, dev, bs)}
    res["continuation"] = {"src_len": S, "tgt_len": T, "pairs": len(range(0, len(pairs.cut_points), 8)),
                           "model": continuation_nll(model, kind, pairs, dev, bs)}
    if kind != "decoder":
        res["likelihood"] = {"scope": "continuation", **res["continuation"]["model"]}
    say(f"{ngram_order}-gram Kneser-Ney baseline")
    train = TokenSplit(dataset, "train")
    lm = KneserNey(V, ngram_order).fit([np.asarray(train.tokens, dtype=np.int64).tolist()])
    res["ngram"] = {"order": ngram_order, **lm.score(np.asarray(part.tokens, dtype=np.int64), accuracy=True)}
    res["continuation"]["ngram"] = ngram_continuation(lm, pairs)
    res["seconds_likelihood"] = round(time.time() - t0, 1)

    if samples:
        res.update(_sample_metrics(model, tokenizer, cfg, dev, dataset, split, reference, num_samples,
                                   max_new_tokens or cfg.sample.max_new_tokens, seed, say))
    return res


def _sample_metrics(model, tokenizer, cfg, dev, dataset, split, reference, num_samples, max_new_tokens, seed, say):
    import time

    from guitarformer.data.tokenization import decode
    from guitarformer.errors import GuitarformerError
    from guitarformer.sample import generate_riffs

    t0 = time.time()
    say(f"sampling {num_samples} riffs of up to {max_new_tokens} tokens")
    s = cfg.sample
    gen: list[Piece] = []
    for b in range(0, num_samples, 16):
        riffs = generate_riffs(model, tokenizer, cfg, dev, min(16, num_samples - b), seed + b, max_new_tokens,
                               s.temperature, s.top_k or None, s.top_p)
        # Score what the model wrote (the sampler's own octave repair is left out: it would hide unplayable notes).
        gen += [piece_of(decode(tokenizer, r.ids)) for r in riffs]
    gen = [p for p in gen if len(p.pitch) >= 2]
    if reference:
        say(f"reading the reference set {reference}")
        ref_full, skipped = reference_from_dir(Path(reference))
        ref_name = str(reference)
    else:
        ref_full, skipped = reference_from_split(dataset, split, tokenizer), 0
        ref_name = f"{dataset} ({split} split, decoded)"
    ref_full = [p for p in ref_full if len(p.pitch) >= 2]
    if len(ref_full) < 2:
        raise GuitarformerError(f"the reference set {ref_name} has fewer than 2 pieces with notes",
                                "pass --reference DIR with real guitar files, or --no-samples")
    # Length-matched: reference pieces are cut into segments as long as the median sample (in whole bars).
    seg = 4.0 * max(1, math.ceil(float(np.median([p.span for p in gen])) / 4.0)) if gen else 16.0
    ref = [q for p in ref_full for q in segments(p, seg)]
    say(f"music metrics: {len(gen)} samples vs {len(ref)} reference segments of {seg:g} quarters")
    out = {"music": {"reference": ref_name, "num_samples": len(gen), "num_reference": len(ref),
                     "reference_files_skipped": skipped, "segment_quarters": seg,
                     "metrics": compare(gen, ref, seed) if gen else {}},
           "playability": {"samples": playability(gen), "reference": playability(ref),
                           "fingering": fingering_agreement(ref_full)}}
    out["seconds_samples"] = round(time.time() - t0, 1)
    return out


# ---------------------------------------------------------------- reporting


def scalars(res: dict) -> dict[str, float]:
    """The numeric leaves of a result, flattened to 'likelihood/nll'-style names (NaN and counts of inputs kept)."""
    out: dict[str, float] = {}

    def walk(d, prefix):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}/")
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                out[prefix + k] = float(v)

    walk(res, "")
    return out


def jsonable(res: Any) -> Any:
    """The result with NaN/inf as null, so --json writes strict JSON."""
    if isinstance(res, dict):
        return {k: jsonable(v) for k, v in res.items()}
    if isinstance(res, float) and not math.isfinite(res):
        return None
    return res


def log_tensorboard(run_dir: Path, res: dict) -> None:
    """Scalars under eval/<split>/... in the run's TensorBoard, at the run's step."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(Path(run_dir) / "tb"))
    for k, v in scalars(res).items():
        if math.isfinite(v):
            w.add_scalar(f"eval/{res['split']}/{k}", v, res.get("step", 0))
    w.close()


def _f(v: Any, nd: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def format_table(res: dict) -> str:
    """A terminal report of an evaluate_run result."""
    L = [f"run {res['run']} ({res['kind']}, step {res['step']}) on {res['dataset']} [{res['split']}]", ""]
    L.append(f"{'likelihood':<34}{'nll/tok':>9}{'ppl':>9}{'acc':>8}{'tokens':>9}")
    lk, ng, co = res["likelihood"], res["ngram"], res["continuation"]
    if lk["scope"] == "stream":
        L.append(f"{'  model (token stream)':<34}{_f(lk['nll']):>9}{_f(lk['ppl'], 2):>9}{_f(lk['accuracy']):>8}{lk['tokens']:>9}")
    L.append(f"{'  ' + str(ng['order']) + '-gram KN (token stream)':<34}{_f(ng['nll']):>9}{_f(ng['ppl'], 2):>9}"
             f"{_f(ng['accuracy']):>8}{ng['tokens']:>9}")
    tag = f"continuation {co['src_len']}->{co['tgt_len']}"
    for name, r in (("model", co["model"]), (f"{ng['order']}-gram KN", co["ngram"])):
        L.append(f"{'  ' + name + ' (' + tag + ')':<34}{_f(r['nll']):>9}{_f(r['ppl'], 2):>9}{_f(r['accuracy']):>8}"
                 f"{r['tokens']:>9}")
    if "music" in res:
        mu = res["music"]
        L += ["", f"music: {mu['num_samples']} samples vs {mu['num_reference']} reference segments of "
                  f"{mu['segment_quarters']:g} quarters ({mu['reference']})",
              f"{'metric':<24}{'samples':>16}{'reference':>16}{'OA':>7}{'ceiling':>9}"]
        for k, v in mu["metrics"].items():
            L.append(f"  {k:<22}{_f(v['samples_mean'], 2) + ' ± ' + _f(v['samples_std'], 2):>16}"
                     f"{_f(v['reference_mean'], 2) + ' ± ' + _f(v['reference_std'], 2):>16}{_f(v['oa'], 2):>7}"
                     f"{_f(v['oa_ceiling'], 2):>9}")
        pl = res["playability"]
        L += ["", f"{'playability':<24}{'samples':>10}{'reference':>11}"]
        for k in ("fretable", "chord_stretch_ok", "shifts_per_bar"):
            L.append(f"  {k:<22}{_f(pl['samples'][k]):>10}{_f(pl['reference'][k]):>11}")
        fg = pl["fingering"]
        L.append(f"  {'fingering vs human tab':<22}{'':>10}{_f(fg['agreement']):>11}  ({fg['notes']} notes, "
                 f"{fg['pieces']} pieces with frets)")
    return "\n".join(L)
