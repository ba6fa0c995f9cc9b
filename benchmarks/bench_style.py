"""Style adherence, judged from notes: a style judge (guitarformer/evaluation/style.py) fitted on the built-in
corpus's train tunes with their types, its accuracy on the val tunes (the ceiling), then riffs from a model asked
for each style it knows, beside riffs asked for nothing, and the share the judge calls the asked style.

Tunes are judged on their first 8 bars (riffs are 8 bars); the judge is fitted on up to 4 consecutive 8-bar windows
of every train tune of a style with at least 20 train tunes (fewer: it is not judged, and its riffs are listed
without a share).

    GUITARFORMER_CACHE=... python benchmarks/bench_style.py [--run RUN] [--data DATASET] [--riffs 16] [--bars 8]
        [--out docs/results/EVAL.md]

With no --run, the shipped model; with no --data, the built-in corpus dataset the run's data config names in the
cache. The section `style` of --out is written whole.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from guitarformer.app import Outputs, SampleRequest, load_run, run_info, sample
from guitarformer.app.sample import GUIDANCE
from guitarformer.data.corpus import builtin_dataset_name, default_dataset_dir
from guitarformer.evaluation.features import piece_of
from guitarformer.evaluation.style import MIN_PIECES, STYLE_BARS, CorpusJudge, corpus_judge

from harness import write_section  # benchmarks/harness.py

TARGET = 0.70


def table(args, loaded, dataset: Path, fitted: CorpusJudge, rows: list, base: Counter, fit_s: float,
          sample_s: float) -> list[str]:
    """The section's markdown: the command, the judge's ceiling per style, the riffs' shares per style asked."""
    judge, ceiling = fitted.judge, fitted.ceiling

    def pct(v):
        return "-" if v is None else f"{v:.0%}"

    cmd = f"GUITARFORMER_CACHE=... python benchmarks/bench_style.py --riffs {args.riffs} --bars {args.bars} " \
          f"--seed {args.seed}" + (f" --run {args.run}" if args.run else "") + \
          (f" --guidance {args.guidance:g}" if args.guidance is not None else "")
    lines = ["### Style: riffs asked for a style, judged from their notes", "",
             f"    {cmd}", "",
             f"Model: {args.run or 'the shipped model (guitarformer/pretrained)'}, {loaded.checkpoint.name} at step "
             f"{loaded.step}. Dataset `{dataset.name}`. The judge (evaluation/style.py): "
             f"{fitted.windows} 8-bar windows of {sum(fitted.tunes[s] for s in judge.styles)} train tunes of the "
             f"{len(judge.styles)} styles with at least {MIN_PIECES} train tunes; fitted in {fit_s:.0f} s, riffs "
             f"sampled and judged in {sample_s:.0f} s on {args.device}.", "",
             "Ceiling: the judge on the first 8 bars of each val tune with a style it knows.", "",
             "| style | val tunes | judged right |", "|---|---|---|"]
    for s, (right, n) in ceiling.per_style.items():
        lines.append(f"| {s} | {n} | {right / n:.0%} |")
    lines += [f"| all | {ceiling.pieces} | {ceiling.overall:.0%} (balanced {ceiling.balanced:.0%}) |", "",
              f"Riffs: {args.riffs} riffs of {args.bars} bars per style asked (`SampleRequest(style=...)`, the run's "
              f"sampling settings, classifier-free guidance {GUIDANCE if args.guidance is None else args.guidance:g} "
              f"on the asked style: `sample --guidance`), and {args.riffs} asked for nothing: the share the judge "
              f"calls each style.", "",
              "| style asked | judged as asked | unconditioned judged so | val ceiling | judged as | meters |",
              "|---|---|---|---|---|---|"]
    for style, share, said, chance, meters in rows:
        right = ceiling.per_style.get(style)
        ceil = pct(right[0] / right[1]) if right else "-"
        lines.append(f"| {style} | {pct(share) if share is not None else 'not judged'} | {pct(chance)} | {ceil} | "
                     + ", ".join(f"{k} {v}" for k, v in said.most_common()) + " | "
                     + ", ".join(f"{k} {v}" for k, v in meters.most_common()) + " |")
    shares = [r[1] for r in rows if r[1] is not None]
    if shares:
        mean = sum(shares) / len(shares)
        lines += ["", f"Mean over the {len(shares)} judged styles: **{mean:.1%}** judged as asked (target >= "
                      f"{TARGET:.0%}); unconditioned riffs are judged {dict(base.most_common())}."]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=None, help="default: the shipped model")
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--riffs", type=int, default=16, help="riffs per style, and unconditioned")
    ap.add_argument("--bars", type=int, default=STYLE_BARS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--guidance", type=float, default=None, help="classifier-free guidance on the asked style "
                    "(default: the sampler's, app/sample.py GUIDANCE)")
    ap.add_argument("--out", type=Path, default=Path("docs/results/EVAL.md"))
    args = ap.parse_args(argv)
    t0 = time.time()
    loaded = load_run(args.run, None, args.device)
    dataset = args.data or default_dataset_dir().parent / builtin_dataset_name(loaded.cfg.data)
    if not (dataset / "manifest.jsonl").is_file():
        ap.error(f"{dataset} is not a prepared dataset (another reader version prepares another folder): pass "
                 f"--data with the built-in corpus dataset the run was trained on")
    fitted = corpus_judge(dataset)
    judge, ceiling = fitted.judge, fitted.ceiling
    fit_s = time.time() - t0
    print(f"judge: {fitted.windows} windows of {sum(fitted.tunes.values())} train tunes, styles {judge.styles}; val "
          f"{ceiling.overall:.1%} ({ceiling.pieces} tunes), balanced {ceiling.balanced:.1%} ({fit_s:.0f} s)")

    def judge_riffs(style: str | None) -> tuple[list[str], Counter]:
        """The style the judge names for each riff asked for `style`, and the riffs' meters."""
        req = SampleRequest.of(outputs=Outputs(), num_samples=args.riffs, bars=args.bars, seed=args.seed,
                               style=style, device=args.device, guidance=args.guidance)
        pieces = [piece_of(r.gs.score) for r in sample(req, loaded).riffs]
        return judge.predict_many(pieces), Counter(f"{n}/{d}" for n, d in (p.meter for p in pieces))

    t1 = time.time()
    base = Counter(judge_riffs(None)[0])
    asked = run_info(loaded).options["style"].values or []
    rows = []
    for style in asked:
        said, meters = judge_riffs(style)
        share = said.count(style) / len(said) if style in judge.styles else None
        rows.append((style, share, Counter(said), base[style] / args.riffs if style in judge.styles else None,
                     meters))
        print(f"{style:>12}: " + (f"{share:.0%}" if share is not None else "not judged") + f"  judged {dict(Counter(said))}")
    sample_s = time.time() - t1

    lines = table(args, loaded, dataset, fitted, rows, base, fit_s, sample_s)
    write_section(args.out, "style", "\n".join(lines), by="python benchmarks/bench_style.py")
    print(f"wrote the style section of {args.out} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
