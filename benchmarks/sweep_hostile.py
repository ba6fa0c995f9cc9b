"""Hostile-file sweep: every hostile case (tests/helpers/hostile_files.py) and truncations and bit flips of each real
format, through every way a file comes in, each in its own process. Per case and entry point: wall time, peak
memory (max RSS of the process tree), exit status, the last line it printed, and whether a traceback escaped.

Entry points, driven as a user would (subprocesses, so the sweep does not depend on where the code lives):
  tab        python -m guitarformer tab FILE
  tab-gp5    python -m guitarformer tab FILE --tracks all --out OUT.gp5  (every part through the writers: a name
             Guitar Pro 5 cannot hold crashed them once)
  infill     python -m guitarformer infill FILE --bars 1-1 --out OUT.mid  (the file is read before any run is
             looked for; a readable one ends in "no run", one line)
  sample     python -m guitarformer sample --prompt FILE --run RUN  (only with --run)
  tab-run    python -m guitarformer tab FILE --run RUN  (only with --run: the model fingers every note)
  infill     with --run, the model fills bars 2-3 (`--run RUN --bars 2-3 --out OUT.mid --tab --gp`): a real fill
  api        python -c: guitarformer.read_guitar(FILE)  (in-process: the readers' own bounds)
  contained  python -c: readers.contained.read_guitar_contained(FILE)
  prepare    python -m guitarformer prepare FOLDER (every case at once): one manifest line each

    PYTHONPATH=. python benchmarks/sweep_hostile.py [--run RUN] [--shared ../shared/data/guitar] [--out table.md]
    PYTHONPATH=. python benchmarks/sweep_hostile.py --real 0    # instead: every real file of the shared folder as it
                                                             # is (--real N: N of each format)

Limits asserted: under 2 GB and 60 s per case, one line and a non-zero exit (or a manifest line), no traceback.
Each process also runs under a 4 GB address-space cap, so a regression cannot take the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the cases: tests/helpers/hostile_files.py
from helpers.hostile_files import Case, mutations, write_cases  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MAX_MB, MAX_S = 2048, 60
SAFETY_CAP = 4 << 30

API = ("import sys\nfrom guitarformer import read_guitar\nfrom guitarformer.errors import GuitarformerError, SkipFile\n"
       "try:\n    parts = read_guitar(sys.argv[1])\nexcept (SkipFile, GuitarformerError, ValueError, TimeoutError, "
       "MemoryError) as e:\n    print(f'{type(e).__name__}: {e}', file=sys.stderr); sys.exit(2)\n"
       "print(f'{len(parts)} part(s)')\n")
CONTAINED = ("import sys\nfrom guitarformer.readers.contained import read_guitar_contained\n"
             "from guitarformer.errors import GuitarformerError, SkipFile\n"
             "try:\n    parts = read_guitar_contained(sys.argv[1])\nexcept (SkipFile, GuitarformerError) as e:\n"
             "    print(f'{type(e).__name__}: {e}', file=sys.stderr); sys.exit(2)\nprint(f'{len(parts)} part(s)')\n")


@dataclass
class Result:
    case: str
    entry: str
    rc: int
    seconds: float
    peak_mb: float
    last: str
    traceback: bool

    @property
    def ok(self) -> bool:
        return self.peak_mb < MAX_MB and self.seconds < MAX_S and not self.traceback and self.last != ""


def run(cmd: list[str], cwd: Path) -> tuple[int, float, float, str, bool]:
    """Run cmd under the safety cap; (exit status, seconds, peak MB of the process tree, last line, traceback?).
    Peak memory: the RSS high-water mark of the waited-for process tree, read in a fresh wrapper process."""
    wrapper = ("import resource, subprocess, sys\n"
               f"resource.setrlimit(resource.RLIMIT_AS, ({SAFETY_CAP}, resource.RLIM_INFINITY))\n"
               "try:\n    p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)\n"
               "    rc, out, err = p.returncode, p.stdout, p.stderr\n"
               "except subprocess.TimeoutExpired as e:\n    rc, out, err = 124, '', 'killed after 120 s'\n"
               "kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
               "import json; print(json.dumps([rc, kb, out, err]))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    t0 = time.time()
    p = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, cwd=cwd, env=env)
    seconds = time.time() - t0
    rc, kb, out, err = json.loads(p.stdout.strip().splitlines()[-1])
    text = (err.strip() or out.strip()).splitlines()
    return rc, seconds, kb / 1024, text[-1][:200] if text else "", "Traceback (most recent call last)" in err


def real_sources(shared: Path) -> list[Path]:
    """One file of each real format: the project's fixtures, and real files from the shared data where present."""
    files = [FIXTURES / "io" / n for n in ("band.mid", "drop_d_capo.gp3", "drop_d_capo.gp4", "drop_d_capo.gp5",
                                          "guitar_and_piano.musicxml", "three_tunes.abc")]
    files.append(FIXTURES / "tabs" / "riff.txt")
    if shared.is_dir():
        for suffix in (".gp", ".gpx", ".mxl", ".xml", ".txt", ".mid"):
            found = sorted(p for p in shared.rglob(f"*{suffix}") if p.is_file() and 2_000 < p.stat().st_size < 300_000)
            files += found[:1]
    return files


REAL_SUFFIXES = (".gp3", ".gp4", ".gp5", ".gp", ".gpx", ".txt", ".mid", ".xml")


def real_files(shared: Path, per_format: int) -> list[Case]:
    """Real files as they are, `per_format` of each suffix (0: every one), in a fixed shuffled order."""
    cases = []
    for suffix in REAL_SUFFIXES:
        found = sorted(p for p in shared.rglob(f"*{suffix}") if p.is_file())
        random.Random(0).shuffle(found)
        cases += [Case(str(p.relative_to(shared)), p, "real file") for p in found[:per_format or None]]
    return cases


def all_cases(folder: Path, shared: Path, kinds: list[str], real: int | None = None) -> list[Case]:
    """The hostile cases and the damaged copies (`kinds`) of one real file of each format; with `real` set, instead
    real files as they are (`real_files`)."""
    if real is not None:
        return real_files(shared, real) if shared.is_dir() else []
    cases = write_cases(folder / "hostile")
    mutated = folder / "mutated"
    mutated.mkdir()
    for k, src in enumerate(real_sources(shared)):
        for name, data in mutations(src.read_bytes(), seed=k).items():
            if name not in kinds:
                continue
            path = mutated / f"{src.stem}-{name}{src.suffix}"
            path.write_bytes(data)
            cases.append(Case(f"{src.name} {name}", path, f"{name} of {src.name}"))
    return cases


def sweep(cases: list[Case], run_dir: Path | None, work: Path) -> list[Result]:
    results = []
    py = sys.executable
    for c in cases:
        entries = {"tab": [py, "-m", "guitarformer", "tab", str(c.path)],
                   "tab-gp5": [py, "-m", "guitarformer", "tab", str(c.path), "--tracks", "all", "--out",
                               str(work / "tab.gp5")],
                   "infill": [py, "-m", "guitarformer", "infill", str(c.path), "--bars", "1-1", "--out",
                              str(work / "filled.mid")],
                   "api": [py, "-c", API, str(c.path)],
                   "contained": [py, "-c", CONTAINED, str(c.path)]}
        if run_dir is not None:  # the model's paths too: a fill written, every note fingered, a riff continued
            entries["infill"] = [py, "-m", "guitarformer", "infill", str(c.path), "--bars", "2-3", "--run", str(run_dir),
                                 "--out", str(work / "filled.mid"), "--tab", str(work / "filled.txt"), "--gp",
                                 str(work / "filled.gp5")]
            entries["tab-run"] = [py, "-m", "guitarformer", "tab", str(c.path), "--run", str(run_dir)]
            entries["sample"] = [py, "-m", "guitarformer", "sample", "--run", str(run_dir), "--prompt", str(c.path),
                                 "--out", str(work / "riff.mid"), "--max-new-tokens", "32"]
        for entry, cmd in entries.items():
            rc, seconds, peak, last, tb = run(cmd, work)
            results.append(Result(c.name, entry, rc, seconds, peak, last, tb))
            print(f"{c.name:32s} {entry:9s} rc={rc:<4d} {seconds:5.1f}s {peak:7.0f}MB {'TRACEBACK ' if tb else ''}"
                  f"{last[:90]}", flush=True)
    return results


def _copy_name(k: int, c: Case) -> str:
    return f"copy-{k}-{c.path.name}"


def sweep_prepare(cases: list[Case], work: Path) -> tuple[Result, dict[str, dict]]:
    folder = work / "all"
    folder.mkdir()
    for k, c in enumerate(cases):
        # a symlink out of the folder (reported, not followed), and a copy
        (folder / f"{k}-{c.path.name}").symlink_to(c.path.resolve())
        shutil.copyfile(c.path, folder / _copy_name(k, c))
    rc, seconds, peak, last, tb = run([sys.executable, "-m", "guitarformer", "prepare", str(folder), "--out",
                                      str(work / "ds"), "--workers", "2"], work)
    lines = {}
    if (work / "ds" / "manifest.jsonl").is_file():
        for d in map(json.loads, (work / "ds" / "manifest.jsonl").read_text().splitlines()):
            lines[Path(d["path"]).name] = d
    return Result("every case at once", "prepare", rc, seconds, peak, last, tb), lines


def table(results: list[Result], prep: Result, lines: dict, cases: list[Case]) -> str:
    out = ["| case | entry | exit | s | peak MB | last line |", "|---|---|---|---|---|---|"]
    for r in results:
        out.append(f"| {r.case} | {r.entry} | {r.rc} | {r.seconds:.1f} | {r.peak_mb:.0f} | "
                   f"{'**traceback** ' if r.traceback else ''}{r.last[:110].replace('|', '/')} |")
    missing = [c.name for k, c in enumerate(cases) if _copy_name(k, c) not in lines]
    bad = [r for r in results if not r.ok]
    worst_mb = max(r.peak_mb for r in results)
    worst_s = max(r.seconds for r in results)
    summary = [f"{len(cases)} cases x {len({r.entry for r in results})} entry points = {len(results)} runs; "
               f"worst peak {worst_mb:.0f} MB, worst wall time {worst_s:.1f} s; tracebacks "
               f"{sum(r.traceback for r in results)}; over a limit or silent: {len(bad)}",
               f"prepare over all {len(cases)} (plus a symlink to each, out of the folder): exit {prep.rc}, "
               f"{prep.seconds:.1f} s, peak {prep.peak_mb:.0f} MB, traceback {prep.traceback}; files without a "
               f"manifest line: {len(missing)}; statuses: "
               + ", ".join(f"{s} {sum(d['status'] == s for d in lines.values())}" for s in ("ok", "skipped", "failed"))]
    return "\n\n".join(summary) + "\n\n" + "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=None,
                    help="a trained run (or pretrained): infill runs it, and tab --run and sample --prompt are driven too")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--only", default="", help="run only the cases whose name contains one of these (comma-separated)")
    ap.add_argument("--mutations", default="cut2of4,flip10,flip100",
                    help="which damaged copies of each real file (of cut1of4..cut3of4, flip1, flip10, flip100)")
    ap.add_argument("--real", type=int, default=None,
                    help="instead: real files of the shared folder as they are, this many per format (0: all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = all_cases(work, args.shared, args.mutations.split(","), args.real)
        if args.only:
            cases = [c for c in cases if any(k in c.name for k in args.only.split(","))]
        results = sweep(cases, args.run, work)
        prep, lines = sweep_prepare(cases, work)
    report = table(results, prep, lines, cases)
    print(report.split("\n\n| case")[0])
    if args.out:
        args.out.write_text(report + "\n")
    # prepare exits 2 when no file at all was usable (as with only hostile files), its manifest written all the same
    bad = [r for r in results if not r.ok] + ([prep] if prep.rc not in (0, 2) or prep.traceback else [])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
