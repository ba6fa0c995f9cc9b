"""Split leaks: does any piece of music sit in two splits of a prepared dataset? Writes the numbers for
docs/results/RELIABILITY.md.

Two sources:
- the shared real files (../shared/data/guitar): "same-score groups" are files with one name in one folder in
  several formats (let-ring.gp4, let-ring.gp5, let-ring.gpx, ...). Before: the split a file's bytes hash to (as
  prepare split until now). After: the splits `prepare` gives them (its manifest).
- the built-in corpus: tunes that read to the same pitches and lengths in the same order (one tune in two
  collections, under two names). Before: byte-hash splits; after: the prepared manifest.

    PYTHONPATH=. python scripts/check_split_leaks.py [--shared ../shared/data/guitar] [--no-corpus] [--no-shared] [--corpus-midi DIR]

Exit status 1 when a group or a piece spans splits after prepare.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from guitarformer.config import DataConfig
from guitarformer.data.corpus import build_corpus
from guitarformer.data.prepare import prepare, sha256_file, split_of
from guitarformer.readers import detect_format, read_guitar

ROOT = Path(__file__).resolve().parents[1]


def byte_split(path: Path) -> str:
    return split_of(sha256_file(path))


def spanning(groups: list[list[Path]], split: dict[Path, str | None]) -> int:
    return sum(len({split[f] for f in g if split.get(f)}) > 1 for g in groups)


def manifest_splits(out: Path) -> tuple[dict[Path, str | None], int, int]:
    """Each file's split in a prepared dataset, the pieces in two splits, and the pieces."""
    split, pieces = {}, defaultdict(set)
    for line in (out / "manifest.jsonl").read_text().splitlines():
        d = json.loads(line)
        split[Path(d["path"])] = d["split"]
        if d.get("piece") and d["split"]:
            pieces[d["piece"]].add(d["split"])
    return split, sum(len(s) > 1 for s in pieces.values()), len(pieces)


def check_shared(shared: Path, tmp: Path) -> tuple[list[str], int]:
    by_name: dict[tuple[Path, str], list[Path]] = defaultdict(list)
    for p in sorted(shared.rglob("*")):
        if p.is_file() and detect_format(p):
            by_name[(p.parent, p.stem.lower())].append(p)
    groups = [g for g in by_name.values() if len(g) > 1]
    files = [f for g in groups for f in g]
    before = spanning(groups, {f: byte_split(f) for f in files})
    out = tmp / "shared"
    prepare(files, out, DataConfig(), progress=False, workers=2)
    split, leaked, n_pieces = manifest_splits(out)
    after = spanning(groups, split)
    return [f"- shared files: {len(groups)} same-score groups ({len(files)} files); groups spanning splits: "
            f"{before} by byte hash (before), **{after}** after prepare; pieces in two splits: **{leaked}** of "
            f"{n_pieces}"], after + leaked


def tune_key(path: Path) -> tuple | None:
    """A tune's pitches and lengths in order (in quarter notes, to a 1/12 grid); None for an unreadable file."""
    try:
        parts = read_guitar(path)
    except Exception:  # the check counts the files prepare kept; an unreadable one is in no split
        return None
    gs = parts[0]
    tpq = gs.score.ticks_per_quarter
    notes = sorted(gs.track.notes, key=lambda n: (n.time, n.pitch))
    return tuple((n.pitch, round(n.duration * 12 / tpq)) for n in notes)


def check_corpus(tmp: Path, midi: Path | None = None) -> tuple[list[str], int]:
    midi = midi or build_corpus(progress=False) / "midi"
    files = sorted(midi.glob("*.mid"))
    by_key: dict[tuple, list[Path]] = defaultdict(list)
    for f in files:
        key = tune_key(f)
        if key:
            by_key[key].append(f)
    groups = [g for g in by_key.values() if len(g) > 1]
    before = spanning(groups, {f: byte_split(f) for f in files})
    out = tmp / "corpus"
    prepare([midi], out, DataConfig(), progress=False, workers=2)
    split, leaked, n_pieces = manifest_splits(out)
    after = spanning(groups, split)
    return [f"- built-in corpus: {len(files)} tunes; {len(groups)} groups of tunes with the same pitches and "
            f"lengths; groups spanning splits: {before} by byte hash (before), **{after}** after prepare; pieces in "
            f"two splits: **{leaked}** of {n_pieces}"], after + leaked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--no-corpus", action="store_true", help="leave the built-in corpus out")
    ap.add_argument("--no-shared", action="store_true", help="leave the shared files out")
    ap.add_argument("--corpus-midi", type=Path, default=None,
                    help="a folder of the corpus's MIDI files already built (default: build_corpus(), cached)")
    args = ap.parse_args()
    lines, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.no_shared:
            pass
        elif args.shared.is_dir():
            got, n = check_shared(args.shared, Path(tmp))
            lines += got
            bad += n
        else:
            lines.append(f"- shared files: {args.shared} is absent; not checked")
        if not args.no_corpus:
            got, n = check_corpus(Path(tmp), args.corpus_midi)
            lines += got
            bad += n
    print("\n".join(lines))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
