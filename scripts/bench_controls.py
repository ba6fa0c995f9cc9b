"""Control adherence (issue #18), as MIDI-GPT reports it: for each control and each value a run learned, sample
riffs asking for it, compute the attribute from the notes the riffs decode to (the functions of
data/controls.py that made the training tokens: estimate_key, controls_per_bar over notes_of), and report the share
equal to the request beside the share of riffs sampled without any control that happen to have it (chance).

Piece attributes (key, time signature, tempo) are counted per riff, bar attributes (density, polyphony, hand
position, palm mute, other techniques) per generated bar with notes. Time signature and tempo open the riff as
REMI tokens in the prompt, so theirs is a share of riffs that keep them in every bar (the model may write another
TimeSig after any Bar, another Tempo at any position). Tuning is not measured: the sampler's constraint plays every
note on a string of the asked tuning, so its share would be 100% by construction.

    python scripts/bench_controls.py RUN [--bars 4] [--num-samples 16] [--device cuda] [--out docs/CONTROLS.md]

Small settings on a CPU: --bars 2 --num-samples 2 --controls density,polyphony,tempo.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from guitarformer.data.controls import BAR_CONTROLS, controls_per_bar, estimate_key, notes_of
from guitarformer.data.tab_tokens import has_controls
from guitarformer.generation.conditioning import conditions
from guitarformer.app.prompt import tokens_per_bar
from guitarformer.generation.riffs import generate_riffs
from guitarformer.runs import load_run
from guitarformer.runtime import resolve_device

# Control name in the table -> (option of `conditions`, how the value is measured: "piece" or a bar control).
MEASURED = {"key": "Key", "density": "Density", "polyphony": "Poly", "position": "Pos", "palm_mute": "PM",
            "techniques": "Tech"}
TARGETS = {"time_signature": 95, "tempo": 95, "density": 80, "polyphony": 80, "position": 80, "key": 70}
TIME_SIGNATURES = ("4/4", "3/4", "2/4", "6/8", "7/8", "5/4")
TEMPOS = (80.0, 120.0, 160.0)
POS_FRET = {"0-4": 2, "5-9": 7, "10-14": 12, "15+": 16}  # a fret in each hand-position bin, as --position takes it


def values_of(tok, name: str) -> list[str]:
    """The values the run learned for one measured control (from its vocabulary)."""
    if name == "time_signature":
        return [ts for ts in TIME_SIGNATURES if f"TimeSig_{ts}" in tok.vocab]
    if name == "tempo":
        return [f"{t:g}" for t in TEMPOS] if any(t.startswith("Tempo_") for t in tok.vocab) else []
    prefix = f"Ctrl{MEASURED[name]}_"
    return sorted(t[len(prefix):] for t in tok.vocab if t.startswith(prefix))


def nearest_tempo(tok, qpm: float) -> float:
    tempos = [float(t.split("_", 1)[1]) for t in tok.vocab if t.startswith("Tempo_")]
    return min(tempos, key=lambda v: abs(v - qpm))


def measure(tok, riff, t0: int) -> dict[str, list[str]]:
    """What one riff is: {"key": [value], "time_signature": [..], "tempo": [..], bar controls: one value per bar}."""
    gs = riff.gs
    notes = notes_of(gs)
    tpq = gs.score.ticks_per_quarter
    sigs = [(ts.time, ts.numerator, ts.denominator) for ts in gs.score.time_signatures]
    out: dict[str, list[str]] = defaultdict(list)
    key = estimate_key(notes)
    if key:
        out["key"].append(key)
    # Time signature and tempo held all through: one value per riff, "mixed" when it changed.
    ts = {f"{n}/{d}" for _, n, d in sigs}
    out["time_signature"].append(ts.pop() if len(ts) == 1 else "mixed")
    tempos = {nearest_tempo(tok, t.qpm) for t in gs.score.tempos}
    out["tempo"].append(f"{tempos.pop():g}" if len(tempos) == 1 else "mixed")
    for bar in controls_per_bar(notes, tpq, sigs):
        for name, ctrl in MEASURED.items():
            if ctrl in BAR_CONTROLS and ctrl in bar:
                out[name].append(bar[ctrl])
    return out


def ask(tok, name: str, value: str):
    if name == "time_signature":
        return conditions(tok, time_signature=value)
    if name == "tempo":
        return conditions(tok, tempo=float(value))
    if name == "position":
        return conditions(tok, hand_position=POS_FRET[value])
    return conditions(tok, **{name: value})


def wanted(tok, name: str, value: str) -> str:
    return f"{nearest_tempo(tok, float(value)):g}" if name == "tempo" else value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--bars", type=int, default=4)
    ap.add_argument("--num-samples", type=int, default=16, help="riffs per control value (and unconditioned)")
    ap.add_argument("--controls", default=",".join([*MEASURED, "time_signature", "tempo"]),
                    help="comma-separated subset of " + ", ".join([*MEASURED, "time_signature", "tempo"]))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("docs/CONTROLS.md"))
    args = ap.parse_args(argv)
    dev = resolve_device(args.device)
    model, tok, cfg = load_run(args.run, None, str(dev))
    if not has_controls(tok):
        print(f"{args.run}: trained without controls (prepare with --set data.controls=true)", file=sys.stderr)
        return 2
    budget = int(args.bars * tokens_per_bar(tok, cfg) * 2) + 32
    s = cfg.sample
    names = [n.strip() for n in args.controls.split(",") if n.strip()]
    known = [*MEASURED, "time_signature", "tempo"]
    if any(n not in known for n in names):
        ap.error(f"--controls: unknown {[n for n in names if n not in known]}; known: {', '.join(known)}")
    t_start = time.time()

    def sample(asked, seed):
        return generate_riffs(model, tok, cfg, dev, args.num_samples, seed, budget, s.temperature,
                              s.top_k or None, s.top_p, bars=args.bars, asked=asked)

    base: dict[str, list[str]] = defaultdict(list)
    for r in sample(None, args.seed):
        for k, v in measure(tok, r, 0).items():
            base[k] += v
    rows = []
    for name in names:
        for value in values_of(tok, name):
            got: list[str] = []
            for r in sample(ask(tok, name, value), args.seed + 1):
                got += measure(tok, r, 0).get(name, [])
            want = wanted(tok, name, value)
            share = sum(g == want for g in got) / len(got) if got else float("nan")
            chance = sum(g == want for g in base[name]) / len(base[name]) if base[name] else float("nan")
            rows.append((name, value, share, len(got), chance, len(base[name])))
            print(f"{name:>15} {value:>10}: {share:6.1%} of {len(got):4d}   unconditioned {chance:6.1%}", flush=True)
    seconds = time.time() - t_start

    lines = ["# Control adherence", "",
             "How often a riff asked for a control value has it, measured from its notes with the functions that "
             "made the training tokens (data/controls.py), beside riffs sampled without controls (chance). "
             "Written by `scripts/bench_controls.py` (its docstring says what is counted and why tuning is not).", "",
             f"    python scripts/bench_controls.py {args.run} --bars {args.bars} --num-samples {args.num_samples} "
             f"--device {args.device} --controls {','.join(names)}", "",
             f"Run `{args.run}`, {dev} ({torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'CPU'}), "
             f"{seconds:.0f} s; {args.num_samples} riffs of at most {args.bars} bars per value.", "",
             "| control | value | asked: share (n) | unconditioned: share (n) |", "|---|---|---|---|"]
    for name, value, share, n, chance, nb in rows:
        lines.append(f"| {name} | {value} | {share:.1%} ({n}) | {chance:.1%} ({nb}) |")
    lines += ["", "| control | mean share asked | mean unconditioned | target |", "|---|---|---|---|"]
    for name in names:
        mine = [r for r in rows if r[0] == name and r[3]]
        if mine:
            mean = sum(r[2] for r in mine) / len(mine)
            chance = sum(r[4] for r in mine if r[5]) / len(mine)
            target = f">= {TARGETS[name]}%" if name in TARGETS else "-"
            lines.append(f"| {name} | {mean:.1%} | {chance:.1%} | {target} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out} ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
