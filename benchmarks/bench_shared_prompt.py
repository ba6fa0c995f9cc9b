"""Rows of one prompt reading it once: what `KVCache.sharing` saves (generation/decode/engine.py SHARED_KEYS_MIN).

    python benchmarks/bench_shared_prompt.py                            # the sweep: rows x prompt tokens, shared vs own
    python benchmarks/bench_shared_prompt.py --song S.gp5 --bars 5-8 --tree /path/to/other/checkout --runs 3

The sweep: the shipped model draws `--new` tokens with the constraint after B copies of one prompt (bench_sample.py's
riff, its first tokens), its rows reading the prompt into one cache they share and, alternating, each into its
own (SHARED_KEYS_MIN set out of reach), in one process; best of `--rounds`. Both must draw the same tokens.

`--song`: the `infill` command on that file (`--bars`, its 8 candidate fills), each run a new process from the command
to the files, this checkout and each `--tree` (through PYTHONPATH) alternating; every run must write what the first
wrote, byte for byte.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


def sweep(args) -> None:
    from guitarformer.generation.decode import engine
    from guitarformer.generation.constraint.guitar import GuitarConstraint
    from guitarformer.generation.decode.sampling import SamplingParams
    from guitarformer.runs import load_run

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_sample import remi_prompt

    loaded = load_run("pretrained", device="cpu")

    model, tok, _ = loaded.model, loaded.tokenizer, loaded.cfg
    tune = torch.tensor(remi_prompt(tok, max(args.prompts)))  # a riff's tokens, fretted as `prepare` frets MIDI
    print(f"\n`python benchmarks/bench_shared_prompt.py`: torch {torch.__version__}, 1 thread, {os.cpu_count()} CPUs; "
          f"the shipped model draws {args.new} tokens with the constraint after B copies of one riff's first tokens; "
          f"seconds, best of {args.rounds}\n")
    print("| rows | prompt tokens | own caches | one shared | shared / own |\n|---:|---:|---:|---:|---:|")
    keep = engine.SHARED_KEYS_MIN
    for B in args.rows:
        for P in args.prompts:
            idx = tune[:P].expand(B, -1)
            best: dict[bool, float] = {}
            outs: dict[bool, torch.Tensor] = {}
            for _ in range(args.rounds):
                for share in (False, True):
                    engine.SHARED_KEYS_MIN = 0 if share else 10**12
                    gens = [torch.Generator().manual_seed(r) for r in range(B)]
                    t = time.perf_counter()
                    outs[share] = engine.generate(model, idx, SamplingParams(args.new), generator=gens,
                                                  constraint=GuitarConstraint(tok))
                    best[share] = min(best.get(share, 1e9), time.perf_counter() - t)
            engine.SHARED_KEYS_MIN = keep
            if not torch.equal(outs[True], outs[False]):
                print(f"rows {B}, prompt {P}: the shared cache drew other tokens", file=sys.stderr)
            print(f"| {B} | {P} | {best[False]:.3f} | {best[True]:.3f} | {best[True] / best[False]:.2f}x |", flush=True)


def infill_runs(args) -> None:
    here = str(Path(__file__).resolve().parents[1])
    trees = [here, *args.tree]
    times: dict[str, list[float]] = {t: [] for t in trees}
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "new.gp5"
        for _ in range(args.runs):
            for tree in trees:
                env = dict(os.environ, PYTHONPATH=tree)
                cmd = [sys.executable, "-m", "guitarformer", "infill", args.song, "--bars", args.bars,
                       "--out", str(out)]
                t = time.perf_counter()
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
                times[tree].append(time.perf_counter() - t)
                if done.returncode != 0:
                    raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
                got = out.read_bytes()
                if first is not None and got != first:
                    raise SystemExit(f"{tree}: another fill than the first run's")
                first = got
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n`infill {Path(args.song).name} --bars {args.bars}` (8 candidate fills), {args.runs} runs each, "
          f"alternating; load average {load:.1f} at the end; seconds from the command to the file\n")
    print("| code | median | range |\n|---|---:|---:|")
    for tree in trees:
        name = "this checkout" if tree == here else tree
        print(f"| {name} | {statistics.median(times[tree]):.2f} | {min(times[tree]):.2f}-{max(times[tree]):.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[2, 8, 32])
    ap.add_argument("--prompts", type=int, nargs="+", default=[4, 32, 128, 512])
    ap.add_argument("--new", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--song", help="time the infill command on this file instead of the sweep")
    ap.add_argument("--bars", default="5-8")
    ap.add_argument("--tree", action="append", default=[], help="another checkout's root (repeatable)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.song:
        infill_runs(args)
    else:
        sweep(args)


if __name__ == "__main__":
    main()
