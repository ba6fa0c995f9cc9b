"""A 16-bar riff from the shipped model, from the command to the files: what a user of `guitarformer sample` waits for.

    python benchmarks/bench_riff_command.py                          # eager and --compile, 3 runs each, interleaved
    python benchmarks/bench_riff_command.py --runs 5 --tree /path/to/other/checkout   # and another tree's code beside

Each run is a new process (`python -m guitarformer sample --bars 16 --seed 1 --out r.mid --tab r.txt`, with
`--compile` for the compiled step), timed by wall clock from its start to its exit: Python's start, the imports, the
model's load, the sampling and the files. The runs alternate between the ways (and trees, each through `PYTHONPATH`), so
background load hits them alike. A compiled run first reads the step an earlier process saved (inductor's cache
folder); a run before any saved step compiles it, and is shown apart ("first"). Every run must write the riff the first
eager run wrote, byte for byte (the compiled step gives the eager step's riff).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import Timer, table


def run(tree: str | None, compiled: bool, out: Path) -> tuple[float, bytes]:
    """One `sample` process: (seconds from its start to its exit, the MIDI it wrote)."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "guitarformer", "sample", "--bars", "16", "--seed", "1", "--out", str(out / "r.mid"),
           "--tab", str(out / "r.txt"), *(["--compile"] if compiled else [])]
    with Timer() as t:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=out)
    took = t.seconds
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return took, (out / "r.mid").read_bytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each way (after one untimed compiled run)")
    ap.add_argument("--tree", action="append", default=[],
                    help="another checkout's root, run through PYTHONPATH beside this one (repeatable)")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[1])
    trees = [here, *args.tree]
    ways = [(tree, compiled) for tree in trees for compiled in (False, True)]
    times: dict[tuple[str, bool], list[float]] = {w: [] for w in ways}
    first: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        _, riff = run(here, False, out)
        for tree in trees:  # compiles the step, or reads the one an earlier process saved
            first[tree], got = run(tree, True, out)
            if got != riff:
                raise SystemExit(f"{tree}: the compiled step wrote another riff than the eager one")
        for _ in range(args.runs):
            for way in ways:
                took, got = run(*way, out)
                if got != riff:
                    raise SystemExit(f"{way}: another riff than the first eager run's")
                times[way].append(took)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n`python benchmarks/bench_riff_command.py --runs {args.runs}`: {os.cpu_count()} CPUs, load average {load:.1f} "
          f"at the end; seconds from the command to the files, a 16-bar riff from the shipped model\n")
    rows = [["this checkout" if tree == here else tree, "--compile" if compiled else "eager",
             f"{statistics.median(times[tree, compiled]):.2f}",
             f"{min(times[tree, compiled]):.2f}-{max(times[tree, compiled]):.2f}", f"{first[tree]:.2f}" if compiled else ""]
            for tree, compiled in ways]
    print(table(["code", "way", "median", "range", "first compiled run"], rows, align="llrrr"))


if __name__ == "__main__":
    main()
