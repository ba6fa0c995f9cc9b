"""Copy Freedoom's level music (General MIDI band arrangements, BSD-3-Clause) into the package's built-in corpus.

    python tools/copy_freedoom.py ../shared/data/guitar-open/freedoom [--out guitarformer/data/corpora/freedoom]

The source is the Freedoom project's repository at the pinned commit below (musics/, COPYING.adoc,
CREDITS-MUSIC); the files are copied unchanged, with the licence and the composers' credits beside them, and
FILES.sha256 records what was copied so a later copy can be checked against it.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

COMMIT = "d14dbbee3b6fbfb2c11cdb65eb61216e86d4ee85"  # github freedoom/freedoom
NOTICES = ("COPYING.adoc", "CREDITS-MUSIC")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("freedoom", type=Path, help="a checkout of freedoom/freedoom (musics/, COPYING.adoc, CREDITS-MUSIC)")
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parents[1] / "guitarformer" / "data" / "corpora" / "freedoom")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    for src in sorted((args.freedoom / "musics").glob("*.mid")):
        shutil.copyfile(src, args.out / src.name)
        lines.append(f"{hashlib.sha256(src.read_bytes()).hexdigest()}  {src.name}")
    for name in NOTICES:
        shutil.copyfile(args.freedoom / name, args.out / name)
    (args.out / "FILES.sha256").write_text("\n".join(lines) + "\n")
    (args.out / "SOURCE").write_text(f"github:freedoom/freedoom@{COMMIT} musics/ (BSD-3-Clause: COPYING.adoc; "
                                     "composers: CREDITS-MUSIC)\n")
    print(f"{len(lines)} MIDI files -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
