"""Unconditioned riffs against the test tunes: for each sampler setting, riffs from a model asked for nothing (as
`guitarformer sample` draws them), compared with the built-in corpus's test split on every music feature of
`guitarformer eval` (OA, the overlapping area of per-piece values, beside the real-vs-real ceiling: OA of two random
halves of the test segments), and the share of their first 16 bars that repeat an earlier bar (evaluation/form.py).

Issue 26's targets: OA at least 0.95x the ceiling on pitch-class entropy, pitch range, used pitch classes, notes per
second and inter-onset interval; repeats within 0.75-1.25x the tunes'. The reference is length-matched as in eval.

    GUITARFORMER_CACHE=... python benchmarks/bench_eval_riffs.py --data DATASET [--run RUN] [--riffs 64]
        [--settings default,top_p=0.9,top_p=0.8,temperature=0.9] [--out docs/results/EVAL.md]

With no --run, the shipped model. The section `riffs` of --out is written whole.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from guitarformer.app import Outputs, SampleRequest, load_run, sample
from guitarformer.app.sample import default_form
from guitarformer.data.corpus import cache_home
from guitarformer.evaluation.features import compare, length_matched, piece_of
from guitarformer.evaluation.form import FORM_BARS, form_report
from guitarformer.evaluation.reference import reference_from_split

from harness import write_section  # benchmarks/harness.py

TARGETED = ("pitch_class_entropy", "pitch_range", "used_pitch_classes", "notes_per_second", "inter_onset_interval")
SETTINGS = "default,top_p=0.9,top_p=0.8,temperature=0.9"
MEANS = ("notes_per_second", "pitch_range", "used_pitch_classes")


def parse_setting(text: str) -> dict[str, float | str]:
    """"default" -> {}; "top_p=0.9" -> {"top_p": 0.9}; "top_p=0.9+temperature=0.9" for both; "form=none" the
    model's own form (`sample --form`); "time_signature=auto" meters drawn from the run's bars, "time_signature=none"
    the model's own (`sample --time-signature`), whatever the run's sample.time_signature."""
    if text == "default":
        return {}
    out: dict[str, float | str] = {}
    named = ("top_p", "temperature", "top_k", "form", "time_signature")
    for part in text.split("+"):
        name, _, value = part.partition("=")
        if name not in named:
            raise SystemExit(f"--settings: {name!r} is not a sampler setting ({', '.join(named)})")
        out[name] = int(value) if name == "top_k" else value if name in ("form", "time_signature") else float(value)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the built-in corpus dataset the run was trained on "
                    "(a folder, or its name in $GUITARFORMER_CACHE/datasets)")
    ap.add_argument("--out", type=Path, default=Path("docs/results/EVAL.md"))
    ap.add_argument("--run", type=Path, default=None, help="default: the shipped model")
    ap.add_argument("--riffs", type=int, default=64)
    ap.add_argument("--split", default="test")
    ap.add_argument("--settings", default=SETTINGS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if not args.data.exists() and len(args.data.parts) == 1:  # a bare name: the cache's datasets folder holds it
        args.data = cache_home() / "datasets" / args.data.name
    t0 = time.time()
    loaded = load_run(args.run, None, args.device)
    real = reference_from_split(args.data, args.split, loaded.tokenizer)
    tunes = [p for p in real.pieces if len(p.pitch) >= 2]
    tunes_form = form_report(real.scores)
    results = {}
    for name in args.settings.split(","):
        t1 = time.time()
        req = SampleRequest.of(outputs=Outputs(), num_samples=args.riffs, seed=args.seed, device=args.device,
                               **parse_setting(name))
        scores = [r.gs.score for r in sample(req, loaded).riffs]
        riffs = [p for p in map(piece_of, scores) if len(p.pitch) >= 2]
        ref, seg = length_matched(riffs, tunes)
        results[name] = (compare(riffs, ref, args.seed), form_report(scores), len(riffs), len(ref), seg,
                         time.time() - t1)
        m = results[name][0]
        print(f"{name}: " + "  ".join(f"{k} {m[k]['oa']:.2f}/{m[k]['oa_ceiling']:.2f}" for k in m)
              + f"  repeats {results[name][1].repeat_share:.1%} ({time.time() - t1:.0f} s)", flush=True)

    names = list(results)
    first = results[names[0]]
    lines = ["### Unconditioned riffs against the test tunes", "",
             f"    GUITARFORMER_CACHE=... python benchmarks/bench_eval_riffs.py --data {args.data.name} --riffs "
             f"{args.riffs} --settings {args.settings} --seed {args.seed}" + (f" --run {args.run}" if args.run else ""),
             "",
             f"Model: {args.run or 'the shipped model (guitarformer/pretrained)'}, {loaded.checkpoint.name} at step "
             f"{loaded.step}. {args.riffs} riffs per sampler setting, drawn as `guitarformer sample` "
             f"draws them with no controls and the default form (`SampleRequest`: `form` unset: "
             + ("the model's own, as it copies by itself (model.copy)" if default_form(loaded) == "none" else
                "auto, each riff the form of a train tune")
             + "; the run's settings: temperature "
             f"{loaded.cfg.sample.temperature:g}, top_p {loaded.cfg.sample.top_p:g}, top_k {loaded.cfg.sample.top_k}), "
             f"against {len(tunes)} {args.split} tunes cut into whole segments as long as the median riff "
             f"({first[4]:g} quarters, {first[3]} segments with the first setting; a tune's partial last segment is "
             f"left out); {time.time() - t0:.0f} s on {args.device}.",
             "Each cell: OA (OA / ceiling). The ceiling is OA between two random halves of the segments. Rows in bold "
             "are issue 26's targets (>= 0.95x the ceiling).", "",
             "| feature | ceiling | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for k in first[0]:
        ceil = first[0][k]["oa_ceiling"]
        cells = []
        for n in names:
            oa = results[n][0][k]["oa"]
            cells.append(f"{oa:.2f} ({oa / ceil:.2f}x)" if ceil else f"{oa:.2f}")
        label = f"**{k}**" if k in TARGETED else k
        lines.append(f"| {label} | {ceil:.2f} | " + " | ".join(cells) + " |")
    for k in MEANS:  # which way the riffs are off, where OA only says how far
        lines.append(f"| riffs / reference mean: {k.replace('_', ' ')} | - | " + " | ".join(
            f"{results[n][0][k]['samples_mean']:.2f} / {results[n][0][k]['reference_mean']:.2f}" for n in names) + " |")
    lines.append(f"| **bars repeating (first {FORM_BARS})**: riffs vs tunes {tunes_form.repeat_share:.1%} | - | "
                 + " | ".join(f"{results[n][1].repeat_share:.1%} ({results[n][1].repeat_share / tunes_form.repeat_share:.2f}x)"
                              for n in names) + " |")
    write_section(args.out, "riffs", "\n".join(lines), by="python benchmarks/bench_eval_riffs.py")
    print(f"wrote the riffs section of {args.out} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
