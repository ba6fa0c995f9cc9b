"""The band, measured: tokens per note of the band stream against its parts alone, nats per note per part on
held-out band files, the bass and drums written for a held-out guitar part against the real ones, every written
file's parts, and the seconds a band riff takes. Writes docs/results/BAND.md and BAND.json.

    python benchmarks/bench_band.py --run RUN --dataset DATASET [--single pretrained] [--bars 8]

RUN: a run that learned the band; DATASET: the band dataset it was trained on (its test split is held out);
--single: a one-part run to compare the guitar part's nats per note with.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
from dataclasses import replace
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from guitarformer.vocab.parts import DRUM
from guitarformer.data.band import pick_parts
from guitarformer.vocab.song_tokens import decode_song, encode_song, part_ids, split_song
from guitarformer.compose.band import BandAsk, accompany_rows, band_parts
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.evaluation.features import compare, piece_of
from guitarformer.music.bars import bar_starts, count_bars
from guitarformer.music.guitar import BASS_TUNING, MAX_FRET, STANDARD_TUNING, fret_of
from guitarformer.readers import read_song
from guitarformer.runs import load_run

ROOT = Path(__file__).resolve().parents[1]
ROLES = ("guitar", "bass", "drums")
KICK, SNARE = {35, 36}, {37, 38, 39, 40}
TUNINGS = {"guitar": (STANDARD_TUNING, 0), "bass": (BASS_TUNING, 0)}


def test_files(dataset: Path) -> list[Path]:
    """The dataset's held-out band files (test split, written as band streams)."""
    out = []
    for line in (dataset / "manifest.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("status") == "ok" and rec.get("split") == "test" and rec.get("fingering") == "band":
            out.append(Path(rec["path"]))
    return out


def token_losses(model, ids: list[int], block: int) -> np.ndarray:
    """Each token's NLL (the first of a window has no context: NaN), in windows of `block` tokens."""
    out = np.full(len(ids), np.nan)
    with torch.no_grad():
        for a in range(0, len(ids) - 1, block):
            x = torch.tensor([ids[a:a + block + 1]])
            logits, _ = model(x[:, :-1])
            nll = torch.nn.functional.cross_entropy(logits[0].float(), x[0, 1:], reduction="none")
            out[a + 1:a + 1 + nll.shape[0]] = nll.numpy()
    return out


def nats_per_part(model, tok, ids: list[int], block: int) -> dict[str, list[float]]:
    """{role: [nats, notes]} of a band stream: each token's loss to the part whose bar it is in."""
    losses = token_losses(model, ids, block)
    acc = {r: [0.0, 0] for r in ROLES}
    now = None
    for i, loss in zip(ids, losses):
        t = tok[int(i)]
        if t == "Bar_None":
            now = None
        elif t.startswith("Part_"):
            now = t.split("_", 1)[1]
        if now is None or math.isnan(loss):
            continue
        acc[now][0] += float(loss)
        acc[now][1] += t.startswith(("Pitch_", DRUM + "_"))
    return acc


def single_nats(model, ids: list[int], tok, block: int) -> list[float]:
    losses = token_losses(model, ids, block)
    notes = sum(tok[int(i)].startswith("Pitch_") for i in ids)
    return [float(np.nansum(losses)), notes]


def _bars(gs, n_bars: int) -> list[int]:
    sc = gs.score
    return bar_starts(sc.time_signatures, sc.ticks_per_quarter, max(sc.end(), 1) + 1)[:n_bars + 1]


def rhythm_stats(parts: dict, n_bars: int) -> dict[str, float]:
    """The bass's and the kit's relation to the guitar over the first `n_bars` bars (module docstring)."""
    g, b, d = parts.get("guitar"), parts.get("bass"), parts.get("drums")
    starts = _bars(g, n_bars)
    end = starts[-1] if len(starts) > n_bars else g.score.end() + 1
    tol = g.score.ticks_per_quarter // 4
    g_on = sorted({n.time for n in g.track.notes if n.time < end})
    out: dict[str, float] = {}
    if b is not None:
        bn = [n for n in b.track.notes if n.time < end]
        on = [any(abs(n.time - t) <= tol for t in g_on) for n in bn]
        out["bass_on_guitar_onsets"] = float(np.mean(on)) if on else float("nan")
        down = [n for n in bn if n.time in starts]
        fits = []
        for n in down:
            pcs = {x.pitch % 12 for x in g.track.notes if x.time <= n.time + tol and x.time + x.duration > n.time}
            if pcs:
                fits.append(n.pitch % 12 in pcs)
        out["downbeat_bass_in_guitar_chord"] = float(np.mean(fits)) if fits else float("nan")
        out["bass_notes_per_bar"] = len(bn) / n_bars
    if d is not None:
        bars = []
        for a, z in zip(starts, starts[1:] + [end]):
            bars.append(frozenset((n.time - a, n.pitch) for n in d.track.notes if a <= n.time < z))
        bars = bars[:n_bars]
        out["kick_onsets_per_bar"] = np.mean([len({t for t, k in bar if k in KICK}) for bar in bars])
        out["snare_onsets_per_bar"] = np.mean([len({t for t, k in bar if k in SNARE}) for bar in bars])
        out["drum_bars_repeating"] = float(np.mean([bar in bars[:k] for k, bar in enumerate(bars) if k])) \
            if len(bars) > 1 else float("nan")
    return out


def where_all_play(parts: dict) -> dict:
    """The parts from the first bar where every one of them plays (a song's intro, one part alone, left out), each
    moved to start at tick 0 (the song's first tempo and time signature kept)."""
    g = parts["guitar"].score
    starts = bar_starts(g.time_signatures, g.ticks_per_quarter, max(gs.score.end() for gs in parts.values()) + 1)
    first = next((a for a in starts if all(any(a <= n.time for n in gs.track.notes) and
                                           min((n.time for n in gs.track.notes if n.time >= a), default=1 << 60)
                                           < a + 2 * (starts[1] - starts[0]) for gs in parts.values())), 0)
    out = {}
    for role, gs in parts.items():
        keep = [k for k, n in enumerate(gs.track.notes) if n.time >= first]
        sc = gs.score.copy()
        sc.tracks[0].notes = [gs.track.notes[k].copy() for k in keep]
        for n in sc.tracks[0].notes:
            n.time -= first
        sc.tempos = sc.tempos[:1]
        sc.time_signatures = sc.time_signatures[:1]
        out[role] = replace(gs, score=sc, frets=[gs.frets[k] for k in keep] if gs.frets else gs.frets,
                            techniques=[gs.techniques[k] for k in keep] if gs.techniques else gs.techniques)
    return out


def playable(gs) -> bool:
    grace = gs.score.ticks_per_quarter // 8
    ends: dict[int, int] = {}
    for note, (s, f) in sorted(zip(gs.track.notes, gs.frets or []), key=lambda x: x[0].time):
        if not (1 <= s <= len(gs.tuning) and 0 <= f <= MAX_FRET and fret_of(note.pitch, s, gs.tuning) == f):
            return False
        if ends.get(s, -1) > note.time + grace:
            return False
        ends[s] = note.time + note.duration
    return bool(gs.frets) or not len(gs.track.notes)


def accompaniment(model, tok, files: list[Path], bars: int, seed: int) -> tuple[list[dict], list[dict], dict]:
    """Real and written stats per held-out file (the guitar given, bass and drums written), and the files' checks
    (with each written and real bass and drum part, for `oa_by_part`)."""
    real, made = [], []
    pieces: dict[str, dict[str, list]] = {r: {"real": [], "written": []} for r in ("bass", "drums")}
    checks = {"riffs": 0, "equal_bars": 0, "playable": 0}
    for k, f in enumerate(files):
        parts = dict(pick_parts(read_song(f), ROLES))
        if set(parts) != set(ROLES):
            continue
        parts = where_all_play(parts)
        truth = dict(decode_song(tok, encode_song(tok, [(r, parts[r]) for r in ROLES])))
        ask = BandAsk(list(ROLES), TUNINGS, num=1, seed=seed + k)
        row = accompany_rows(model, tok, ask, [("guitar", parts["guitar"])],
                             SamplingParams(max_new_tokens=2400, max_bars=bars), block_size=model.config.block_size)[0]
        written = dict(band_parts(tok, row, ask))
        real.append(rhythm_stats(truth, bars))
        made.append(rhythm_stats(written, bars))
        end = _bars(truth["guitar"], bars)[-1]
        for role in pieces:
            for side, parts_ in (("real", truth), ("written", written)):
                gs = parts_.get(role)
                if gs is not None and len(gs.track.notes):
                    sc = gs.score.copy()
                    sc.tracks[0].notes = [n for n in sc.tracks[0].notes if n.time < end]
                    pieces[role][side].append(piece_of(sc))
        checks["riffs"] += 1
        lengths = {count_bars(gs.score.time_signatures, gs.score.ticks_per_quarter, gs.score.end())
                   for gs in written.values() if len(gs.track.notes)}
        checks["equal_bars"] += len(lengths) <= 1 or max(lengths) - min(lengths) <= 1
        checks["playable"] += all(playable(written[r]) for r in ("bass",) if r in written)  # the parts it wrote
    checks["pieces"] = pieces
    return real, made, checks


def oa_by_part(pieces: dict[str, dict[str, list]]) -> dict[str, dict[str, float]]:
    """Per written part: the mean over the features (evaluation/features.py) of OA(written, real) and of the
    real-vs-real ceiling (one half of the real parts against the other), and their ratio."""
    out = {}
    for role, sides in pieces.items():
        if len(sides["real"]) < 4 or len(sides["written"]) < 2:
            continue
        res = compare(sides["written"], sides["real"])
        oa = float(np.nanmean([v["oa"] for v in res.values()]))
        ceiling = float(np.nanmean([v["oa_ceiling"] for v in res.values()]))
        out[role] = {"oa": oa, "ceiling": ceiling, "ratio": oa / ceiling if ceiling else float("nan")}
    return out


def token_costs(tok, files: list[Path]) -> dict[str, float]:
    band = alone = notes = 0
    for f in files:
        parts = pick_parts(read_song(f), ROLES)
        band += len(encode_song(tok, parts))
        alone += sum(len(part_ids(tok, r, gs)) + 2 for r, gs in parts)
        notes += sum(len(gs.track.notes) for _, gs in parts)
    return {"files": len(files), "notes": notes, "band_tokens_per_note": band / notes,
            "alone_tokens_per_note": alone / notes, "ratio": band / alone}


def command_seconds(run: Path, bars: int, repeats: int) -> dict[str, float]:
    """Seconds from the command to the files: a band riff (--parts guitar,bass,drums) and a one-part riff, alternating."""
    with tempfile.TemporaryDirectory() as tmp:
        base = [sys.executable, "-m", "guitarformer", "sample", "--run", str(run), "--bars", str(bars),
                "--style", "rock", "--out", f"{tmp}/r.mid", "--gp", f"{tmp}/r.gp5"]
        times: dict[str, list[float]] = {"band": [], "guitar": []}
        for _ in range(repeats):
            for name, extra in (("band", ["--parts", "guitar,bass,drums"]), ("guitar", [])):
                t = time.perf_counter()
                subprocess.run(base + extra, check=True, capture_output=True)
                times[name].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in times.items()}


def prepare_costs(folder: Path) -> dict[str, dict[str, float]]:
    """`prepare` of a folder as one guitar part per sequence and as band streams: seconds, files per second and the
    peak memory of the largest process (each in a process of its own, one after the other, cold caches)."""
    out = {}
    files = sum(1 for p in folder.iterdir() if p.is_file())
    for name, extra in (("single", []), ("band", ["--set", "data.parts=guitar,bass,drums"])):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "XDG_CACHE_HOME": tmp}
            cmd = ["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "guitarformer", "prepare", str(folder),
                   "--out", f"{tmp}/ds", "--workers", "2", *extra]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            seconds, kb = done.stderr.strip().splitlines()[-1].split()
            out[name] = {"files": files, "seconds": float(seconds), "files_per_s": files / float(seconds),
                         "peak_mb": int(kb) / 1024}
    return out


def mean(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows if key in r and not math.isnan(r[key])]
    return float(np.mean(vals)) if vals else float("nan")


def write_page(res: dict, out: Path) -> None:
    lines = ["# The band: guitar, bass and drums", "",
             f"Written by `{res['command']}` on {res['machine']}.", "",
             "## Tokens", "",
             "| | tokens per note | |", "|---|---|---|",
             f"| band stream (bar by bar, each part after its part token) | {res['tokens']['band_tokens_per_note']:.3f} | "
             f"{res['tokens']['ratio']:.3f}x |",
             f"| the same parts, each alone | {res['tokens']['alone_tokens_per_note']:.3f} | 1.000x |", "",
             f"{res['tokens']['files']} Freedoom arrangements, {res['tokens']['notes']:,} notes.", "",
             "## Nats per note per part (held-out band files)", "",
             "| part | band model | one-part model, the part alone |", "|---|---|---|"]
    for r in ROLES:
        single = res["single_nats"].get(r)
        lines.append(f"| {r} | {res['nats'][r]:.3f} | {f'{single:.3f}' if single else '-'} |")
    lines += ["", f"{res['held_out_files']} held-out files (the dataset's test split).", "",
              "## Accompaniment: bass and drums written for a held-out guitar part", "",
              "| measure | real | written | ratio |", "|---|---|---|---|"]
    for key, (a, b) in res["accompaniment"].items():
        lines.append(f"| {key.replace('_', ' ')} | {a:.3f} | {b:.3f} | {b / a if a else float('nan'):.2f}x |")
    if res.get("oa"):
        lines += ["", "| part | OA written vs real (mean over features) | real vs real ceiling | ratio |", "|---|---|---|---|"]
        lines += [f"| {r} | {v['oa']:.3f} | {v['ceiling']:.3f} | {v['ratio']:.2f}x |" for r, v in res["oa"].items()]
    c = res["checks"]
    lines += ["", f"{c['riffs']} files, {res['bars']} bars each: parts of equal length in bars in {c['equal_bars']} of "
              f"{c['riffs']}, every written bass part playable in {c['playable']} of {c['riffs']}.", "",
              "## Seconds from the command to the files", "",
              "| riff | seconds (median) |", "|---|---|"]
    for k, v in res["seconds"].items():
        lines.append(f"| {res['bars']} bars, {'guitar, bass and drums' if k == 'band' else 'guitar alone'} | {v:.2f} |")
    if res.get("prepare"):
        p = res["prepare"]
        lines += ["", f"## prepare of {p['single']['files']} multi-track files", "",
                  "| tokens | seconds | files per second | peak memory (MB) |", "|---|---|---|---|"]
        for k in ("single", "band"):
            lines.append(f"| {'one part per sequence' if k == 'single' else 'band streams'} | {p[k]['seconds']:.1f} | "
                         f"{p[k]['files_per_s']:.1f} | {p[k]['peak_mb']:.0f} |")
    out.write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--dataset", type=Path, required=True)
    ap.add_argument("--single", default="pretrained")
    ap.add_argument("--bars", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prepare", type=Path, default=None, help="a folder of multi-track files to prepare both ways")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "BAND.md")
    args = ap.parse_args()
    torch.set_num_threads(2)
    run = load_run(args.run)
    model, tok, cfg = run.model, run.tokenizer, run.cfg
    files = test_files(args.dataset)
    acc = {r: [0.0, 0] for r in ROLES}
    single_model = load_run(args.single).model
    single = [0.0, 0]
    for f in files:
        parts = pick_parts(read_song(f), ROLES)
        ids = encode_song(tok, parts, style="rock")
        for r, (n, c) in nats_per_part(model, tok, ids, cfg.model.block_size).items():
            acc[r][0] += n
            acc[r][1] += c
        guitar = split_song(tok, ids).get("guitar")
        if guitar:
            n, c = single_nats(single_model, guitar, tok, cfg.model.block_size)
            single[0] += n
            single[1] += c
    real, made, checks = accompaniment(model, tok, files, args.bars, args.seed)
    keys = sorted({k for r in real for k in r})
    res = {"command": "python benchmarks/bench_band.py " + " ".join(sys.argv[1:]),
           "machine": f"{torch.get_num_threads()} CPU threads, torch {torch.__version__}",
           "tokens": token_costs(tok, sorted((ROOT / "guitarformer/data/corpora/freedoom").glob("*.mid"))[:40]),
           "nats": {r: acc[r][0] / max(1, acc[r][1]) for r in ROLES},
           "single_nats": {"guitar": single[0] / max(1, single[1])} if single[1] else {},
           "held_out_files": len(files), "bars": args.bars,
           "accompaniment": {k: (mean(real, k), mean(made, k)) for k in keys},
           "oa": oa_by_part(checks.pop("pieces")), "checks": checks,
           "seconds": command_seconds(args.run, args.bars, args.repeats),
           "prepare": prepare_costs(args.prepare) if args.prepare else None}
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=2, default=float))
    write_page(res, args.out)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
