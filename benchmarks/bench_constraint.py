"""What the sampler's constraint costs in the riffs `guitarformer sample` writes (issue 28: at most 1.2x).

    python benchmarks/bench_constraint.py                       # the shipped model, four asks, best of 3 each
    python benchmarks/bench_constraint.py --run RUN --repeat 5
    python benchmarks/bench_constraint.py --compile             # the same riffs with the compiled one-token step
    python benchmarks/bench_constraint.py --replay              # the constraint's own calls replayed, no model between
    python benchmarks/bench_constraint.py --replay --rows 32    # ... for 32 riffs at once (a batch's masks)

Each ask is a `guitarformer sample` command line run in-process (one riff, batch 1, its own bars, guards, form and
guidance, as a user gets them). The constraint's methods (`start`, `mask`, `update`, `steer`: generation/constraint/guitar.py)
and the draw (`sample_next`) are timed inside `generate`; the rest of `generate` is the model's steps and the loop.
"constraint cost" is generate's time over generate's time less the constraint's: what the constraint multiplies a riff's
sampling time by. The numbers are per token drawn, best of `--repeat` calls by generate's time. To compare two trees,
run this script from one with `PYTHONPATH` set to the other's root, alternating.

`--replay`: each ask's constraint calls (`start`, `mask`, `update`, `steer`, with the tokens the riff drew) are
recorded once, then replayed on the same constraint `--rounds` times with nothing between them: the constraint's own
cost, µs a token, best round, without the model's steps' noise (or their caches: inside `generate` the same work costs
about twice as much, docs/results/BENCH_SAMPLE.md). For comparing two versions of the constraint's code. `--rows N`: each ask
with `--num-samples N` (N riffs drawn together), µs a step of N rows: the constraint's host side at a batch, which
is also what a model on a GPU waits for up to 64 rows (generation/decode/engine.py `_deciding_device`).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections import defaultdict

import torch

ASKS = {
    "plain, 16 bars": ["--bars", "16", "--seed", "1"],
    "key + style + density, 8 bars": ["--bars", "8", "--seed", "3", "--key", "D:major", "--style", "jig",
                                      "--density", "high"],
    "hand position per bar, 8 bars": ["--bars", "8", "--seed", "5", "--hand-position", "1-4:0,5-8:7"],
    "meter + key, guidance 1.5, 8 bars": ["--bars", "8", "--seed", "4", "--key", "E:minor", "--time-signature", "3/4",
                                          "--guidance", "1.5"],
}


def timers() -> dict[str, float]:
    """Wrap the constraint's methods, the draw and generate with timers; returns the accumulator."""
    from guitarformer.generation.decode import engine
    from guitarformer.generation.constraint.guitar import GuitarConstraint

    acc: dict[str, float] = defaultdict(float)

    def wrap(owner, name: str, key: str) -> None:
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[key] += time.perf_counter() - t
                if key == "draw":
                    acc["tokens"] += 1

        setattr(owner, name, timed)

    for name in ("start", "mask", "update", "steer"):
        wrap(GuitarConstraint, name, "constraint")
    wrap(engine, "sample_next", "draw")
    from guitarformer.compose import riffs  # what `sample` calls generate through (imported there by name)

    wrap(riffs, "generate", "generate")
    return acc


def replay(args) -> None:
    """Record each ask's constraint calls, replay them `args.rounds` times (best round, µs a step: a token of each of
    `args.rows` rows)."""
    from guitarformer.cli import main as cli
    from guitarformer.generation.constraint.guitar import GuitarConstraint

    names = ("start", "mask", "update", "steer")
    plain = {n: getattr(GuitarConstraint, n) for n in names}
    calls: list = []  # [(constraint, [(method, args), ...]), ...] of the ask being recorded

    def recording(name: str):
        @functools.wraps(plain[name])
        def record(self, *a):
            if name == "start":
                calls.append((self, []))
            calls[-1][1].append((name, tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in a)))
            return plain[name](self, *a)

        return record

    def once() -> float:
        t = time.perf_counter()
        for con, made in calls:
            for name, a in made:
                plain[name](con, *a)
        return time.perf_counter() - t

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, ask in ASKS.items():
            calls.clear()
            for n in names:
                setattr(GuitarConstraint, n, recording(n))
            try:
                cli(["sample", "--run", args.run, "--threads", str(args.threads), "--out", f"{tmp}/r.mid", *ask,
                     "--num-samples", str(args.rows)], standalone_mode=False)
            finally:
                for n in names:
                    setattr(GuitarConstraint, n, plain[n])
            tokens = sum(name == "mask" for _, made in calls for name, _ in made)
            with torch.inference_mode():
                once()  # the string rules' memos filled, as a process's later riffs find them
                best = min(once() for _ in range(args.rounds))
            rows.append(f"| {label} | {tokens} | {best / tokens * 1e6:.1f} |")
    print(f"\n`python benchmarks/bench_constraint.py --run {args.run} --replay --rounds {args.rounds} --rows {args.rows}`: "
          f"torch {torch.__version__}, {args.threads} thread(s); best of {args.rounds} replays\n")
    unit = "a token" if args.rows == 1 else f"a step of {args.rows} rows"
    print(f"| ask | steps | constraint µs {unit}, replayed |\n|---|---:|---:|")
    print("\n".join(rows))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="pretrained")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--compile", action="store_true",
                    help="each ask with `sample --compile` (the compiled one-token step; its compiling falls in the "
                         "first of the --repeat calls, which best-of leaves out)")
    ap.add_argument("--replay", action="store_true",
                    help="time the constraint's recorded calls replayed without the model (see the module docstring)")
    ap.add_argument("--rounds", type=int, default=15, help="--replay: replays of each ask; the best is shown")
    ap.add_argument("--rows", type=int, default=1, help="--replay: riffs drawn together (`sample --num-samples`)")
    args = ap.parse_args()
    if args.replay:
        torch.set_num_threads(args.threads)
        return replay(args)
    from guitarformer.cli import main as cli

    acc = timers()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, ask in ASKS.items():
            best = None
            for _ in range(args.repeat):
                acc.clear()
                cli(["sample", "--run", args.run, "--threads", str(args.threads), "--out", f"{tmp}/r.mid", *ask,
                     *(["--compile"] if args.compile else [])], standalone_mode=False)
                got = dict(acc)
                if best is None or got["generate"] < best["generate"]:
                    best = got
            n = best["tokens"]
            gen, con, draw = best["generate"], best["constraint"], best["draw"]
            rows.append((label, int(n), (gen - con - draw) / n * 1e6, con / n * 1e6, draw / n * 1e6, gen / (gen - con)))
            print(rows[-1], file=sys.stderr, flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n`python benchmarks/bench_constraint.py --run {args.run} --repeat {args.repeat}"
          f"{' --compile' if args.compile else ''}`: torch {torch.__version__}, "
          f"{args.threads} thread(s), load average {load:.1f} at the end; microseconds per token drawn, best of "
          f"{args.repeat}\n")
    print("| ask | tokens | model and loop | constraint | draw | constraint cost |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, n, model, con, draw, cost in rows:
        print(f"| {label} | {n} | {model:.0f} | {con:.0f} | {draw:.0f} | {cost:.2f}x |")


if __name__ == "__main__":
    main()
