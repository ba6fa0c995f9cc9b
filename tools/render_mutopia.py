"""Render the Mutopia Project's classical guitar pieces (LilyPond sources) to the MIDI the built-in corpus ships.

    python tools/render_mutopia.py ../shared/data/guitar-open/mutopia [--out guitarformer/data/corpora/mutopia]

Needs Debian's `lilypond` (2.24; `convert-ly` for old syntax) on this machine only: what it renders is committed,
so users need no LilyPond. Each piece's MANIFEST.tsv row gives its composer, title, Mutopia id and licence; the
rendered files go to <out>/<licence class>/ (PD, CC-BY, CC-BY-SA) with CREDITS.tsv listing every file's credit.

Cleaning, per rendered MIDI file: a TabStaff that also sends its notes to MIDI doubles a staff's notes, so a track
whose notes (onset, pitch) are already in another track is dropped; the guitar tracks of a solo piece (its voices
on one or two staves) are merged into one part on the nylon-string program; a duo keeps a track per guitar; other
instruments (flute, violin, voice, lute) are left out; a part written in plain treble clef, which LilyPond sends an
octave above its sound, is moved down an octave (WRITTEN_OCTAVE_UP). String numbers in the sources are not in LilyPond's MIDI
and are not kept.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import symusic

from guitarformer.data.guitar_corpora import drop_doubles

NYLON = 24
# A guitar staff in plain treble clef (not "treble_8") sends the written pitch, an octave above the sound: a part
# whose lowest note lies at or above D3 is read as one and moved down an octave (every guitar piece here that is
# written at sounding pitch goes below D3)
WRITTEN_OCTAVE_UP = 50
GUITAR_PROGRAMS = range(24, 32)
SOLO = {"Guitar", "Classical Guitar", "Guitare"}
OTHERS = ("flute", "violin", "voice", "lute", "recorder", "vihuela", "cello")  # instruments beside a guitar
TIMEOUT = 300
CREDIT_FIELDS = ["file", "piece", "composer", "title", "mutopia_id", "license", "license_class", "source", "commit"]


def main_ly(piece_dir: Path) -> Path | None:
    """The file LilyPond compiles: <name>.ly beside the piece, or <name>-lys/<name>.ly for multi-file sources."""
    name = piece_dir.name
    for cand in (piece_dir / f"{name}.ly", piece_dir / f"{name}-lys" / f"{name}.ly"):
        if cand.is_file():
            return cand
    with_header = [p for p in sorted(piece_dir.rglob("*.ly")) if "\\header" in p.read_text(errors="replace")]
    return with_header[0] if with_header else None


def without_blocks(text: str, command: str = "\\paper") -> str:
    """The text without its `\\paper { ... }` blocks (braces matched): page layout that 2.24 refuses in old
    sources (\\on-the-fly #first-page headers) and that MIDI never needs."""
    out, i = [], 0
    while (j := text.find(command, i)) >= 0:
        k = text.find("{", j)
        if k < 0 or text[j + len(command):k].strip():
            out.append(text[i:j + len(command)])
            i = j + len(command)
            continue
        depth, m = 0, k
        for m in range(k, len(text)):
            depth += {"{": 1, "}": -1}.get(text[m], 0)
            if depth == 0:
                break
        out.append(text[i:j])
        i = m + 1
    return "".join(out) + text[i:]


def _lilypond(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["lilypond", "-dbackend=null", "-dno-point-and-click", "-o", str(out), src.name],
                          cwd=src.parent, capture_output=True, text=True, timeout=TIMEOUT)


def render_piece(piece_dir: Path, work: Path) -> tuple[list[Path], str]:
    """LilyPond's MIDI files of one piece (one per \\score), converting old syntax with convert-ly if needed."""
    copy = work / piece_dir.name
    shutil.copytree(piece_dir, copy)
    main = main_ly(copy)
    if main is None:
        return [], "no main .ly file"
    out = work / "out"
    out.mkdir()
    res = _lilypond(main, out / main.stem)
    midis = sorted(out.glob("*.mid*"))
    if not midis:
        for ly in copy.rglob("*.ly"):  # an idiom of 2.10-2.12 that convert-ly leaves: 2.24's unfold-repeats takes two
            text = ly.read_text(errors="replace")
            if "applyMusic #unfold-repeats" in text:
                ly.write_text(text.replace("\\applyMusic #unfold-repeats", "\\unfoldRepeats"))
            subprocess.run(["convert-ly", "-e", "-q", ly.name], cwd=ly.parent, capture_output=True, timeout=TIMEOUT)
        res = _lilypond(main, out / main.stem)
        midis = sorted(out.glob("*.mid*"))
    if not midis:  # page layout an old source writes in a way 2.24 refuses: MIDI needs none of it
        for ly in copy.rglob("*.ly"):
            ly.write_text(without_blocks(ly.read_text(errors="replace")))
        res = _lilypond(main, out / main.stem)
        midis = sorted(out.glob("*.mid*"))
    err = (res.stderr.strip().splitlines() or ["no MIDI written"])[-1]
    return midis, "" if midis else f"lilypond: {err[:200]}"


def clean(score: symusic.Score, solo: bool, guitars_only: bool) -> symusic.Score | None:
    """The guitar part(s) of a rendered file: TabStaff doubles dropped, a solo piece's staves merged into one."""
    tracks = [t for t in score.tracks if len(t.notes) and not t.is_drum]
    kept = drop_doubles(tracks)  # a TabStaff (or a doubled staff) sending the same notes again
    guitars = [t for t in kept if t.program in GUITAR_PROGRAMS]
    if not guitars and guitars_only:
        guitars = kept  # a piece for guitars alone that never named its MIDI instrument
    if not guitars:
        return None
    out = symusic.Score(score.ticks_per_quarter)
    out.tempos.extend(score.tempos)
    out.time_signatures.extend(score.time_signatures)
    out.key_signatures.extend(score.key_signatures)
    parts = [guitars] if solo else [[t] for t in guitars]
    for i, group in enumerate(parts):
        track = symusic.Track(name="Guitar" if len(parts) == 1 else f"Guitar {i + 1}", program=NYLON)
        for t in group:
            track.notes.extend(t.notes)
        track.notes.sort(key=lambda n: (n.time, n.pitch))
        if min(n.pitch for n in track.notes) >= WRITTEN_OCTAVE_UP:
            track = track.shift_pitch(-12)
        out.tracks.append(track)
    return out


def render_row(args: tuple[dict, str, str]) -> list[dict]:
    """Render one MANIFEST row; one credit record per written file (or one failure record)."""
    row, root, out_root = args
    piece_dir = Path(root) / row["piece"]
    slug = row["piece"].replace("/", "-")
    dest = Path(out_root) / row["license_class"]
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            midis, reason = render_piece(piece_dir, Path(tmp))
        except subprocess.TimeoutExpired:
            midis, reason = [], f"lilypond ran past {TIMEOUT} s"
        records = []
        for i, midi in enumerate(midis):
            instrument = row["instrument"].strip()
            score = clean(symusic.Score(str(midi)), solo=instrument in SOLO,
                          guitars_only=not any(o in instrument.lower() for o in OTHERS))
            if score is None:
                reason = "no guitar track"
                continue
            name = f"{slug}.mid" if len(midis) == 1 else f"{slug}-{i + 1}.mid"
            score.dump_midi(str(dest / name))
            records.append({"file": f"{row['license_class']}/{name}", "piece": row["piece"],
                            "composer": row["composer"], "title": row["title"], "mutopia_id": row["id"],
                            "license": row["license"], "license_class": row["license_class"],
                            "source": row["source"], "commit": row["commit"]})
    return records or [{"failed": row["piece"], "reason": reason}]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mutopia", type=Path, help="the mutopia/ folder (MANIFEST.tsv and the composers' folders)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "guitarformer" / "data"
                    / "corpora" / "mutopia")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--limit", type=int, default=0, help="render only the first N pieces (a check)")
    ap.add_argument("--licences", default="PD,CC-BY,CC-BY-SA", help="licence classes to render")
    ap.add_argument("--pieces", default="", help="render only these pieces (comma-separated MANIFEST names)")
    args = ap.parse_args(argv)
    if shutil.which("lilypond") is None:
        sys.exit("error: lilypond is not installed\nfix: apt-get install lilypond (Debian's 2.24)")
    with open(args.mutopia / "MANIFEST.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    classes = args.licences.split(",")
    rows = [r for r in rows if r["license_class"] in classes
            and (not args.pieces or r["piece"] in args.pieces.split(","))]
    if args.limit:
        rows = rows[:args.limit]
    credits_file = args.out / "CREDITS.tsv"
    jobs = [(r, str(args.mutopia), str(args.out)) for r in rows]
    credits, failed = [], []
    if credits_file.is_file():  # the rows of the pieces not rendered now
        now = {r["piece"] for r in rows}
        with open(credits_file, newline="") as f:
            credits = [r for r in csv.DictReader(f, delimiter="\t") if r["piece"] not in now]
    with ProcessPoolExecutor(args.workers) as ex:
        for i, recs in enumerate(ex.map(render_row, jobs)):
            for r in recs:
                (failed if "failed" in r else credits).append(r)
            print(f"\r{i + 1}/{len(jobs)} pieces, {len(failed)} failed", end="", file=sys.stderr)
    print(file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(credits_file, "w", newline="") as f:
        w = csv.DictWriter(f, CREDIT_FIELDS, delimiter="\t")
        w.writeheader()
        w.writerows(sorted(credits, key=lambda r: r["file"]))
    for r in failed:
        print(f"not rendered: {r['failed']}: {r['reason']}", file=sys.stderr)
    print(f"{len(credits)} files from {len(rows) - len(failed)} of {len(rows)} pieces -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
