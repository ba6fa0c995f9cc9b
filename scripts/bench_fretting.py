"""Score tab.fret() against human fingerings (Guitar Pro files and ASCII tabs) and write docs/FRETTING.md.

    python scripts/bench_fretting.py [--data ../shared/data/guitar] [--doc docs/FRETTING.md]

Accuracy = share of notes whose (string, fret) equals the human tab's. The lowest-fret rule (each chord
gets the distinct-string assignment with the smallest sum of frets) is scored on the same notes.
Files are de-duplicated by their note content (the test suites hold the same song as .gp3/.gp4/.gp5).
The GP loop here is deliberately minimal and independent of guitarformer.data.io.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from guitarformer.tab import FretCosts, fret, fret_lowest  # noqa: E402

Part = tuple[str, tuple[int, ...], int, list[tuple[int, int, int]], list[tuple[int, int]]]


def gp_parts(path: Path) -> list[Part]:
    """(name, tuning lowest first, capo, notes (onset, dur, pitch), human (string, fret)) per guitar track."""
    import guitarpro

    song = guitarpro.parse(str(path))
    parts = []
    for ti, track in enumerate(song.tracks):
        if track.isPercussionTrack or len(track.strings) not in (6, 7):
            continue
        tuning = tuple(s.value for s in sorted(track.strings, key=lambda s: -s.number))
        if max(tuning) < 55:  # bass-register instrument with 6 strings
            continue
        notes, frets = [], []
        for measure in track.measures:
            for voice in measure.voices:
                for beat in voice.beats:
                    for note in beat.notes:
                        if note.type != guitarpro.NoteType.normal:  # ties continue a note; dead notes have no pitch
                            continue
                        if not 1 <= note.string <= len(tuning):
                            continue
                        pitch = tuning[len(tuning) - note.string] + note.value
                        notes.append((beat.start, beat.duration.time, pitch))
                        frets.append((note.string, note.value))
        if notes:
            parts.append((f"{path.name}#{ti}", tuning, track.offset, notes, frets))
    return parts


def ascii_parts(path: Path) -> list[Part]:
    from guitarformer.data.ascii_tab import read_ascii_tab

    parts = []
    for gs in read_ascii_tab(path):
        notes = [(n.time, n.duration, n.pitch) for n in gs.track.notes]
        ok = [i for i, f in enumerate(gs.frets) if f[1] >= 0]
        parts.append((path.name, gs.tuning, gs.capo, [notes[i] for i in ok], [gs.frets[i] for i in ok]))
    return parts


def collect(files, reader) -> tuple[list[Part], int]:
    parts, seen, bad = [], set(), 0
    for f in files:
        try:
            got = reader(f)
        except Exception:  # broken/unsupported files are part of the data set; count and go on
            bad += 1
            continue
        for p in got:
            key = hashlib.sha1(repr((p[1], p[3], p[4])).encode()).hexdigest()
            if key not in seen and len(p[3]) >= 8:
                seen.add(key)
                parts.append(p)
    return parts, bad


def score(parts: list[Part], fn, **kw) -> tuple[int, int]:
    hit = total = 0
    for _, tuning, capo, notes, human in parts:
        # Human tabs number frets from the capo; the pitches above already include it via the fret.
        pred = fn([(o, d, p) for o, d, p in notes], tuning=tuning, capo=0, **kw)
        hit += sum(a == b for a, b in zip(pred, human))
        total += len(human)
    return hit, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "FRETTING.md")
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()

    gp_files = sorted(p for ext in ("gp3", "gp4", "gp5") for p in args.data.rglob(f"*.{ext}"))
    gp, gp_bad = collect(gp_files, gp_parts)
    tab_files = sorted((args.data / "classtab" / "app" / "tabs").glob("*.txt"))
    tabs, tab_bad = collect(tab_files, ascii_parts)

    rows = []
    for name, parts in (("Guitar Pro (gp3/4/5)", gp), ("classtab ASCII tabs", tabs)):
        t0 = time.perf_counter()
        h, n = score(parts, fret)
        dt = time.perf_counter() - t0
        hb, _ = score(parts, fret_lowest)
        rows.append((name, len(parts), n, h / max(n, 1), hb / max(n, 1), n / max(dt, 1e-9)))
        print(f"{name}: {len(parts)} parts, {n} notes: fret() {h / max(n, 1):.1%}  lowest-fret {hb / max(n, 1):.1%}  ({n / dt:.0f} notes/s)")
    print(f"unreadable: {gp_bad} GP files, {tab_bad} ASCII tabs (skipped)")
    if not args.no_doc:
        write_doc(args.doc, rows, len(gp_files), gp_bad, len(tab_files), tab_bad)


def write_doc(path: Path, rows, n_gp, gp_bad, n_tab, tab_bad) -> None:
    c = FretCosts()
    table = "\n".join(
        f"| {name} | {parts} | {notes} | {acc:.1%} | {base:.1%} | {speed:,.0f} |" for name, parts, notes, acc, base, speed in rows
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""# Fretting: how well `tab.fret()` matches human tabs

Command (from the repository root, with the shared data checked out beside it):

    python scripts/bench_fretting.py

Accuracy is the share of notes whose (string, fret) equals the one in the human tab. The lowest-fret
rule (each chord gets the distinct-string assignment with the smallest sum of frets) is computed by the
same script on the same notes. Parts are de-duplicated by note content; ties and dead notes are left out.
Files read: {n_gp} GP files ({gp_bad} unreadable), {n_tab} ASCII tabs ({tab_bad} skipped/unreadable).

| data | parts | notes | fret() | lowest-fret | fret() notes/s |
|---|---|---|---|---|---|
{table}

Published anchors (DadaGP, a different and much larger corpus, so not directly comparable): a
Transformer fretting model 81.6%, the lowest-fret rule 79.2%, Guitar Pro 8's own 76.6%.

## The cost

`fret()` is a Viterbi pass over onsets. Each onset's chord has candidate fingerings (assignments of
its notes to distinct strings; the {16} cheapest kept); the path minimises the sum of

- chord cost: `position`×(lowest fretted fret) + `stretch`×(span beyond {c.comfortable_span} frets)
  + `impossible` beyond {c.max_span} frets + `high_fret`×(frets above {c.high_fret_from}) + `open_string` per open string;
- transition cost: `move`×(shift of the lowest fretted fret) + `string_jump`×(shift of the mean string)
  + `cut_sustain` when a string still sounding from the previous onset is re-used.

Weights now: {c}.

Notes that cannot be played (pitch out of range, or a chord note with no string of its own) get (-1, -1).

## Honest status

- The target was 85%; this cost reaches about 72% on the GP parts and 78% on classtab, 6-9 points
  above the lowest-fret rule on the same notes. Weight tuning (a coordinate random search over the
  weights above, scored on all GP parts plus every 25th classtab file, so those numbers are
  in-sample) moved accuracy by only 1-2 points: the remaining errors are choices of *style*, not of
  weight. Examples: rock parts play power chords on the low strings at frets 5-9 where an open-
  position shape exists; canon-style melodies stay on strings 2-3 at frets 11-19 for timbre.
  One fixed cost cannot prefer both; a per-piece position prior or a learned model would.
- The GP files are mostly format test suites, not a curated corpus: tiny parts, duplicated songs
  (de-duplicated by content), and some deliberately broken files.
- classtab's string/fret come from our own ASCII reader (`guitarformer/data/ascii_tab.py`); tabs
  whose labels or text give a tuning use it, others are taken as standard tuning.
""")


if __name__ == "__main__":
    main()
