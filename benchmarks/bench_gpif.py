"""Reading speed of Guitar Pro 6-8 files against PyGuitarPro reading the GP3-5 twins of the same scores.

The twins are alphaTab's and slundi/guitarpro's test scores saved by Guitar Pro in several versions
(../shared/data/guitar; paired as in tests/readers/test_gpif.py). For every score with a .gp and/or .gpx and a GP5
(else GP4/GP3) twin, each round times, interleaved: read_guitar(.gp), read_guitar(.gpx),
guitarpro.parse(GP5 twin) and read_guitar(GP5 twin) (PyGuitarPro plus our conversion). Each file's time
is its best of --rounds; every side reads all pitched tracks (tracks="all"), as PyGuitarPro does.
Per-note time = summed time / notes read. Prints a Markdown table (docs/results/BENCH_GPIF.md).

    python benchmarks/bench_gpif.py [--rounds 7] [--data ../shared/data/guitar]
"""

from __future__ import annotations

import argparse
import gc
import platform
import re
import sys
import time
from pathlib import Path

import guitarpro

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "benchmarks"))  # harness, where a test loads this file by its path

from harness import table  # noqa: E402

from guitarformer.errors import SkipFile
from guitarformer.readers import read_guitar


def twin_pairs(data: Path) -> list[tuple[Path, Path]]:
    """(GP6-8 file, its GP5 twin (else GP4, GP3)): alphaTab's guitarproN folders hold one score per name in
    every version; elsewhere twins share a folder."""

    def family(f: Path) -> str:
        return "guitarpro" if re.fullmatch(r"guitarpro\d", f.parent.name) else str(f.parent)

    pairs = []
    for base in (data / "alphatab", data / "slundi-guitarpro"):
        files = sorted(base.rglob("*.gp*"))
        old: dict[tuple[str, str], dict[str, Path]] = {}
        for f in files:
            if f.suffix.lower() in (".gp3", ".gp4", ".gp5"):
                old.setdefault((family(f), f.stem), {})[f.suffix.lower()] = f
        for f in files:
            twins = old.get((family(f), f.stem))
            if f.suffix.lower() in (".gp", ".gpx") and twins:
                pairs.append((f, twins.get(".gp5") or twins.get(".gp4") or twins[".gp3"]))
    return pairs


def notes_in(path: Path) -> int:
    try:
        return sum(len(p.track.notes) for p in read_guitar(path, tracks="all"))
    except SkipFile:
        return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()

    pairs = [(new, old) for new, old in twin_pairs(args.data) if notes_in(new) and notes_in(old)]
    if not pairs:
        sys.exit(f"no twin pairs with notes under {args.data}")
    jobs: dict[tuple[str, Path], object] = {}
    for new, old in pairs:
        jobs[(new.suffix.lower(), new)] = lambda p=new: read_guitar(p, tracks="all")
        jobs[("pyguitarpro", old)] = lambda p=old: guitarpro.parse(str(p))
        jobs[("gp3-5 reader", old)] = lambda p=old: read_guitar(p, tracks="all")
    best = {key: float("inf") for key in jobs}
    for _ in range(args.rounds):  # interleaved: every file once per round, so load drifts hit every side
        for key, job in jobs.items():
            gc.collect()
            t = time.perf_counter()
            job()
            best[key] = min(best[key], time.perf_counter() - t)

    def side(kind: str, files) -> tuple[float, int]:
        files = set(files)
        return (sum(best[(kind, f)] for f in files), sum(notes_in(f) for f in files))

    rows = []
    for suffix in (".gp", ".gpx"):
        mine = [(new, old) for new, old in pairs if new.suffix.lower() == suffix]
        t_new, n_new = side(suffix, [n for n, _ in mine])
        t_pgp, n_old = side("pyguitarpro", [o for _, o in mine])
        t_ours5, _ = side("gp3-5 reader", [o for _, o in mine])
        per_new, per_pgp, per_ours5 = t_new / n_new, t_pgp / n_old, t_ours5 / n_old
        rows.append((suffix, len(mine), n_new, n_old, n_new / t_new, n_old / t_pgp, n_old / t_ours5,
                     per_new / per_pgp, per_new / per_ours5))
    print(f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}; "
          f"best of {args.rounds} interleaved rounds per file; all pitched tracks read\n")
    print(table(["GP6-8 files", "scores", "notes (GP6-8 / twins)", "GP6-8 notes/s", "PyGuitarPro parse notes/s",
                 "GP3-5 reader notes/s", "per-note time vs PyGuitarPro parse", "vs GP3-5 reader"],
                [[suffix, n, f"{n_new:,} / {n_old:,}", f"{r_new:,.0f}", f"{r_pgp:,.0f}", f"{r_ours5:,.0f}",
                  f"{ratio:.2f}x", f"{ratio5:.2f}x"] for suffix, n, n_new, n_old, r_new, r_pgp, r_ours5, ratio, ratio5
                 in rows]))


if __name__ == "__main__":
    main()
