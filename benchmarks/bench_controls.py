"""Control adherence, as MIDI-GPT reports it, with and without the sampler's guards: for each control and each value
a run learned (its training data's, vocab/seen.py), sample riffs asking for it, compute the attribute from the notes
the riffs decode to (the functions of vocab/controls.py that made the training tokens: estimate_key,
controls_per_bar over notes_of), and report the share equal to the request, guarded and unguarded, beside the share
of riffs sampled without any control that happen to have it (chance).

Piece attributes (key, time signature, tempo, a style's usual meter) are counted per riff, bar attributes (density,
polyphony, hand position, palm mute, other techniques) per generated bar with notes. Per-bar schedules
(`per_bar_density`: bars 1-2 low, 3-4 high and the reverse; `per_bar_position`: frets 0 then 7 and the reverse)
count each generated bar against its own bar's value. Values the run never learned are refused by `sample` and
listed, not measured. Tuning is not measured: the run's data has one tuning, and the sampler plays every note on a
string of it. Style is measured by its meter (the time signature most of the style's training bars have, which the
guard asks for where the user names none); what the notes sound like is left to a style classifier.

The key guard's settings (generation/constraint/guards.py: `--key-strength` off a pitch outside the scale, `--tonic-bonus` onto
the tonic at a bar's first note, `--profile-weight` on the scale's other degrees) can be swept here; the key rows also
give what the riffs sound like (pitch classes per riff, pitch-class entropy in bits, the share of notes repeating the
previous pitch), beside the same for the run's val tunes cut into segments of `--bars` bars (the bar length of
their first time signature), so that a guard which reaches the key by droning one note shows.

    python benchmarks/bench_controls.py RUN [--bars 4] [--num-samples 16] [--guard both|on|off] [--form auto|none]
        [--out docs/results/CONTROLS.md]

`--form auto` draws each riff's form from the run's tunes (of the asked style) as `sample` does by default
(compose/form.py); `none` (the default, as the published table was measured) leaves the form to the model.

Small settings on a CPU: --bars 2 --num-samples 2 --controls density,tempo.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from guitarformer.runs.run import load_run
from guitarformer.app.prompt import tokens_per_bar
from guitarformer.app.sample import GUIDANCE
from guitarformer.vocab.controls import (BAR, PlayedNote, control, controls_per_bar, estimate_key, notes_of,
                                        option_controls, position_value)
from guitarformer.data.corpus import builtin_dataset_name, default_dataset_dir
from guitarformer.data.dataset import TokenSplit
from guitarformer.vocab.tab_tokens import has_controls
from guitarformer.vocab.tokenization import decode
from guitarformer.errors import GuitarformerError
from guitarformer.evaluation.features import Piece, pitch_class_entropy
from guitarformer.compose.conditioning import conditions
from guitarformer.generation.constraint.guards import KEY_STRENGTH, PROFILE_WEIGHT, TONIC_BONUS, GuardSpec
from guitarformer.compose.riffs import Draws, RiffSpec, generate_riffs, riff_forms
from guitarformer.generation.decode.sampling import SamplingParams

# Control name in the table -> the registered control its values are measured as (vocab/controls.py); the hand
# position's row is "position", and style is measured by its meter (below).
MEASURED = {("position" if option == "hand_position" else option): c.name
            for option, c in option_controls().items() if c.name != "Style"}
PER_BAR = {"per_bar_density": ("density", ["1-2:low,3-4:high", "1-2:high,3-4:low"]),
           "per_bar_position": ("position", ["1-2:0,3-4:7", "1-2:7,3-4:0"])}
ALL = [*MEASURED, "time_signature", "tempo", "style", *PER_BAR]
TARGETS = {"time_signature": 100, "tempo": 100, "density": 85, "position": 95, "key": 80, "style": 70,
           "per_bar_density": 85, "per_bar_position": 95}
TEMPOS = (80.0, 120.0, 160.0)
POS_FRET = {"0-4": 2, "5-9": 7, "10-14": 12, "15+": 16}  # a fret in each hand-position bin, as --hand-position takes


def values_of(loaded, name: str) -> list[str]:
    """The values of one measured control the run learned (its training data's summary)."""
    seen = loaded.seen
    if name in PER_BAR:
        return PER_BAR[name][1]
    if name == "time_signature":
        return seen.known("TimeSig")
    if name == "tempo":
        if seen.tempo is None:
            return []
        lo, hi = seen.tempo  # the tempos it saw: the usual three where they lie in its range, else its ends
        return [f"{t:g}" for t in TEMPOS if lo <= t <= hi] or [f"{t:g}" for t in sorted({lo, hi})]
    if name == "style":
        return seen.known("Style")
    if name == "position":
        return list(POS_FRET)
    return seen.known(MEASURED[name])


def refused(loaded, name: str) -> list[str]:
    """Values of the run's vocabulary its training data never held enough of (refused by `sample`)."""
    if name not in MEASURED or name == "position":
        return []
    prefix = f"Ctrl{MEASURED[name]}_"
    known = set(values_of(loaded, name))
    return sorted(t[len(prefix):] for t in loaded.tokenizer.vocab if t.startswith(prefix) and
                  t[len(prefix):] not in known)


def nearest_tempo(tok, qpm: float) -> float:
    tempos = [float(t.split("_", 1)[1]) for t in tok.vocab if t.startswith("Tempo_")]
    return min(tempos, key=lambda v: abs(v - qpm))


def measure(tok, riff) -> dict[str, list[str]]:
    """What one riff is: {"key": [value], "time_signature": [..], "tempo": [..], bar controls: one value per bar
    (None for a bar without notes, so that bar k of the list is bar k of the riff)}."""
    gs = riff.gs
    notes = notes_of(gs)
    tpq = gs.score.ticks_per_quarter
    sigs = [(ts.time, ts.numerator, ts.denominator) for ts in gs.score.time_signatures]
    out: dict[str, list] = defaultdict(list)
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
            if control(ctrl).scope == BAR:
                out[name].append(bar.get(ctrl))
    out.update(music(notes))
    return out


MUSIC = ("pcs", "entropy", "repeats")


def music(notes: list[PlayedNote]) -> dict[str, list[float]]:
    """What the notes sound like, as one-entry lists: pitch classes used, pitch-class entropy (bits, evaluation/
    features.py), share of notes repeating the previous pitch (in onset order)."""
    pitches = [n.pitch for n in sorted(notes, key=lambda n: (n.onset, n.pitch))]
    zeros = np.zeros(len(pitches))
    return {"pcs": [len({p % 12 for p in pitches})],
            "entropy": [pitch_class_entropy(Piece(zeros, zeros, np.asarray(pitches, dtype=np.int64)))],
            "repeats": [sum(a == b for a, b in zip(pitches, pitches[1:])) / max(1, len(pitches) - 1)]}


def tunes(loaded, bars: int) -> dict | None:
    """The run's val tunes in segments of `bars` bars (bars of their first time signature; whole segments with at
    least two notes): mean pitch classes, entropy and repeats, and the share whose estimate_key is the tune's Key
    token. None where the dataset is not at hand."""
    cfg = loaded.cfg
    folder = Path(cfg.data.dataset).expanduser() if cfg.data.dataset else \
        default_dataset_dir().with_name(builtin_dataset_name(cfg.data))
    if not (folder / "val.bin").exists():
        return None
    tok, split = loaded.tokenizer, TokenSplit(folder, "val")
    got: dict[str, list[float]] = defaultdict(list)
    for i in range(split.num_sequences):
        ids = split.sequence(i).tolist()
        key = next((str(tok[j])[len("CtrlKey_"):] for j in ids if str(tok[j]).startswith("CtrlKey_")), None)
        score = decode(tok, ids)
        notes = [PlayedNote(n.time, n.duration, n.pitch) for t in score.tracks for n in t.notes]
        if not notes:
            continue
        sig = score.time_signatures[0] if len(score.time_signatures) else None
        span = bars * round(score.ticks_per_quarter * (sig.numerator * 4 / sig.denominator if sig else 4))
        end = max(n.onset + n.duration for n in notes)
        for a in range(0, end, span):
            seg = [n for n in notes if a <= n.onset < a + span]
            if a + span > end + span / bars or len(seg) < 2:  # a partial last segment is a sparser piece
                continue
            for k, v in music(seg).items():
                got[k] += v
            if key:
                got["key"].append(estimate_key(seg) == key)
    return {k: sum(v) / len(v) for k, v in got.items()} if got else None


def ask(loaded, name: str, value: str, guard: bool, strength: float, tonic: float, profile: float):
    tok, seen = loaded.tokenizer, loaded.seen
    common = {"seen": seen, "guard": GuardSpec(key_strength=strength, tonic_bonus=tonic, profile_weight=profile)
              if guard else False}
    if name == "time_signature":
        return conditions(tok, time_signature=value, **common)
    if name == "tempo":
        return conditions(tok, tempo=float(value), **common)
    if name == "position":
        return conditions(tok, hand_position=POS_FRET[value], **common)
    if name == "per_bar_position":
        return conditions(tok, hand_position=value, **common)
    if name == "per_bar_density":
        return conditions(tok, density=value, **common)
    return conditions(tok, **{name: value}, **common)


def wanted(loaded, name: str, value: str, bars: int) -> list[str]:
    """The value each measured unit should have: one per riff, or one per bar for per-bar schedules."""
    if name == "tempo":
        return [f"{nearest_tempo(loaded.tokenizer, float(value)):g}"]
    if name == "style":
        return [loaded.seen.usual_meter(value)]
    if name in PER_BAR:
        ranges = dict(part.split(":") for part in value.split(","))
        per_bar = []
        for span, v in ranges.items():
            a, b = (int(x) for x in span.split("-"))
            per_bar += [v if name == "per_bar_density" else position_value(int(v))] * (b - a + 1)
        return per_bar[:bars]
    return [value]


def score(got: list[list], want: list[str], per_bar: bool) -> tuple[int, int]:
    """(hits, units): riffs, or bars with notes (each against its own bar's value with a schedule)."""
    hits = units = 0
    for values in got:
        for k, v in enumerate(values):
            if v is None:
                continue
            units += 1
            hits += v == (want[min(k, len(want) - 1)] if per_bar else want[0])
    return hits, units


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, nargs="?", default=None, help="run directory (default: the shipped model)")
    ap.add_argument("--bars", type=int, default=4)
    ap.add_argument("--num-samples", type=int, default=16, help="riffs per control value (and unconditioned)")
    ap.add_argument("--controls", default=",".join(ALL), help="comma-separated subset of " + ", ".join(ALL))
    ap.add_argument("--guard", choices=("both", "on", "off"), default="both",
                    help="measure with the sampler's guards, without, or both (two columns)")
    ap.add_argument("--key-strength", type=float, default=KEY_STRENGTH, help="the key guard's logits off a pitch "
                    "outside the scale")
    ap.add_argument("--tonic-bonus", type=float, default=TONIC_BONUS, help="the key guard's logits onto the tonic "
                    "at a bar's first note")
    ap.add_argument("--profile-weight", type=float, default=PROFILE_WEIGHT, help="the key guard's logits per standard "
                    "deviation of the key profile on the scale's other degrees")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--guidance", type=float, default=GUIDANCE, help="classifier-free guidance on the asked piece "
                    "controls, as `sample` applies it (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--form", choices=("auto", "none"), default="none", help="auto: each riff a real tune's form, "
                    "as `sample` draws it by default; none: the model's own")
    ap.add_argument("--out", type=Path, default=None, help="also write the report here (docs/results/CONTROLS.md for the "
                    "page; a run of a few controls would otherwise replace the whole page)")
    args = ap.parse_args(argv)
    loaded = load_run(args.run, None, args.device)
    model, tok, cfg, dev = loaded.model, loaded.tokenizer, loaded.cfg, loaded.device
    if not has_controls(tok):
        print(f"{args.run}: trained without controls (prepare with --set data.controls=true)", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.controls.split(",") if n.strip()]
    if any(n not in ALL for n in names):
        ap.error(f"--controls: unknown {[n for n in names if n not in ALL]}; known: {', '.join(ALL)}")
    modes = {"both": [True, False], "on": [True], "off": [False]}[args.guard]
    budget = int(args.bars * tokens_per_bar(tok, cfg) * 2) + 32
    s = cfg.sample
    t_start = time.time()

    def sample(asked, seed, style=None) -> list[dict[str, list]]:
        forms = riff_forms(loaded.forms, seed, args.num_samples, style, args.bars) \
            if args.form == "auto" and loaded.forms else None
        params = SamplingParams(budget, s.temperature, s.top_k or None, s.top_p, args.bars, guidance=args.guidance)
        spec = RiffSpec(asked=asked, forms=forms)
        riffs = generate_riffs(model, tok, cfg, params, Draws(args.num_samples, seed), spec, dev)
        return [measure(tok, r) for r in riffs]

    base = sample(None, args.seed)
    rows = []
    for name in names:
        field = PER_BAR[name][0] if name in PER_BAR else "time_signature" if name == "style" else name
        per_bar = name in PER_BAR or name in MEASURED and control(MEASURED[name]).scope == BAR
        for value in values_of(loaded, name):
            want = wanted(loaded, name, value, args.bars)
            row = {"name": name, "value": value}
            for guard in modes:
                try:
                    got = sample(ask(loaded, name, value, guard, args.key_strength, args.tonic_bonus,
                                     args.profile_weight), args.seed + 1, value if name == "style" else None)
                except GuitarformerError as e:
                    print(f"{name} {value}: {e.problem}", file=sys.stderr)
                    continue
                row[guard] = score([g[field] for g in got], want, per_bar)
                for k in MUSIC:
                    row[(k, guard)] = sum(g[k][0] for g in got) / len(got)
            row["chance"] = score([g[field] for g in base], want, per_bar)
            rows.append(row)
            cols = "  ".join(f"{'guarded' if g else 'unguarded'} {share(row.get(g))}" +
                             (f" {sounds(row, g)}" if name == "key" and g in row else "") for g in modes)
            print(f"{name:>16} {value:>18}: {cols}   unconditioned {share(row['chance'])}", flush=True)
    seconds = time.time() - t_start
    if args.out is None:
        print(f"({seconds:.0f} s; --out FILE writes the report)")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ref = tunes(loaded, args.bars) if "key" in names else None
    args.out.write_text(report(args, loaded, names, modes, rows, base, seconds, ref))
    print(f"wrote {args.out} ({seconds:.0f} s)")
    return 0


def sounds(row: dict, guard: bool) -> str:
    """A key row's music under one guard setting, for the progress line."""
    return f"({row[('pcs', guard)]:.1f} pcs, {row[('entropy', guard)]:.2f} bits, {row[('repeats', guard)]:.0%} rep.)"


def share(hits_units: tuple[int, int] | None) -> str:
    if not hits_units or not hits_units[1]:
        return "-"
    hits, units = hits_units
    return f"{hits / units:.1%} ({units})"


def _mean(rows: list[dict], key) -> str:
    vals = [r[key][0] / r[key][1] for r in rows if r.get(key) and r[key][1]]
    return f"{sum(vals) / len(vals):.1%}" if vals else "-"


def report(args, loaded, names, modes, rows, base, seconds, ref: dict | None = None) -> str:
    dev = loaded.device
    heads = ["guarded" if g else "unguarded" for g in modes]
    run = args.run or "the shipped model"
    lines = ["# Control adherence", "",
             "How often a riff asked for a control value has it, measured from its notes with the functions that "
             "made the training tokens (vocab/controls.py), with the sampler's guards (generation/constraint/guards.py, the "
             "default) and without (`--no-guard`), beside riffs sampled without controls (chance). Written by "
             "`benchmarks/bench_controls.py` (its docstring says what is counted); values the run's training data "
             "never held are refused by `sample` and listed below the tables.", "",
             "    python benchmarks/bench_controls.py " + (f"{args.run} " if args.run else "") +
             f"--bars {args.bars} --num-samples {args.num_samples} --guard {args.guard} --key-strength "
             f"{args.key_strength:g} --tonic-bonus {args.tonic_bonus:g} --profile-weight {args.profile_weight:g} "
             f"--device {args.device} --guidance {args.guidance:g} --seed {args.seed} "
             f"--controls {','.join(names)}" + (" --form auto" if args.form == "auto" else ""), "",
             f"Run: {run} ({loaded.checkpoint.name}, step {loaded.step}); {dev} "
             f"({torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'CPU'}), {seconds:.0f} s; "
             f"{args.num_samples} riffs of at most {args.bars} bars per value; what the run knows: "
             f"{loaded.seen.source}.", "",
             "| control | value | " + " | ".join(f"{h}: share (n)" for h in heads) + " | unconditioned: share (n) |",
             "|---|---|" + "---|" * (len(heads) + 1)]
    for r in rows:
        lines.append(f"| {r['name']} | {r['value']} | " + " | ".join(share(r.get(g)) for g in modes) +
                     f" | {share(r['chance'])} |")
    lines += ["", "| control | " + " | ".join(f"mean {h}" for h in heads) + " | mean unconditioned | target |",
              "|---|" + "---|" * (len(heads) + 2)]
    for name in names:
        mine = [r for r in rows if r["name"] == name]
        if mine:
            target = f">= {TARGETS[name]}%" if name in TARGETS else "-"
            label = "style (its usual meter; judged: docs/results/EVAL.md)" if name == "style" else name
            lines.append(f"| {label} | " + " | ".join(_mean(mine, g) for g in modes) +
                         f" | {_mean(mine, 'chance')} | {target} |")
    lines += key_music(args, modes, rows, base, ref)
    if "style" in names:
        lines += ["", "A style's row here counts riffs in the meter most of that style's training bars have (the meter "
                  "a style brings under the guard). Whether a riff sounds like the style is judged by a classifier "
                  "fitted on real tunes (evaluation/style.py): `benchmarks/bench_style.py`, section `style` of "
                  "docs/results/EVAL.md, with the classifier's own accuracy on val tunes as the ceiling."]
    refusals = [f"{n} {', '.join(v)}" for n in names if (v := refused(loaded, n))]
    if refusals:
        lines += ["", "Refused (in the vocabulary, never learned from the training data): " + "; ".join(refusals) + "."]
    return "\n".join(lines) + "\n"


def key_music(args, modes, rows, base, ref: dict | None) -> list[str]:
    """The report's table of what riffs asked for a key sound like, beside unconditioned riffs and the val tunes."""
    keys = [r for r in rows if r["name"] == "key"]
    if not keys:
        return []

    def cells(values: dict) -> str:
        return f"{values['pcs']:.1f} | {values['entropy']:.2f} | {values['repeats']:.1%}"

    lines = ["", f"The music under the key guard (strength {args.key_strength:g}, tonic bonus {args.tonic_bonus:g}, "
             f"profile weight {args.profile_weight:g}), mean over the key rows: pitch classes per riff, pitch-class "
             "entropy (bits) and share of notes repeating the previous pitch.", "",
             "| riffs | pitch classes | pitch-class entropy | repeated pitch |", "|---|---|---|---|"]
    for g in modes:
        mean = {k: sum(r[(k, g)] for r in keys) / len(keys) for k in MUSIC}
        lines.append(f"| key asked, {'guarded' if g else 'unguarded'} | {cells(mean)} |")
    lines.append(f"| unconditioned | {cells({k: sum(g[k][0] for g in base) / len(base) for k in MUSIC})} |")
    if ref:
        lines.append(f"| val tunes, {args.bars}-bar segments (estimate_key is the tune's key in "
                     f"{ref.get('key', math.nan):.0%}) | {cells(ref)} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
