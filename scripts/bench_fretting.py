"""Score tab.fret() against human fingerings (Guitar Pro files and ASCII tabs) on held-out files; write docs/FRETTING.md.

    python scripts/bench_fretting.py [--data ../shared/data/guitar] [--doc docs/FRETTING.md] [--every N]
    python scripts/bench_fretting.py --fit [--epochs 3]     # refit FretCosts on the fit half, print the table

Accuracy = share of notes whose (string, fret) equals the human tab's. The lowest-fret rule (each chord
gets the distinct-string assignment with the smallest sum of frets) is scored on the same notes.
Files are split in two by a hash of their name without extension (so a song's .gp3/.gp4/.gp5 copies
land in the same half): half 0 is where FretCosts' weights were fit, half 1 is held out. Parts are
de-duplicated by their note content. The GP loop here is deliberately minimal and independent of
guitarformer.data.io.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from guitarformer.tab import DEFAULT_COSTS, FretCosts, fingering_features, fret, fret_lowest  # noqa: E402
from guitarformer.tab import _decode, _group_onsets  # noqa: E402  (fitting needs the decoder with gold paths)

# (name, tuning lowest first, capo, notes (onset, dur, sounding pitch), human (string, fret from the capo))
Part = tuple[str, tuple[int, ...], int, list[tuple[int, int, int]], list[tuple[int, int]]]


def gp_parts(path: Path) -> list[Part]:
    """One Part per guitar track."""
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
                        pitch = tuning[len(tuning) - note.string] + track.offset + note.value
                        notes.append((beat.start, beat.duration.time, pitch))
                        frets.append((note.string, note.value))
        if notes:
            parts.append((f"{path.name}#{ti}", tuning, track.offset, notes, frets))
    return parts


def ascii_parts(path: Path) -> list[Part]:
    from guitarformer.data.ascii_tab import read_ascii_tab

    parts = []
    for gs in read_ascii_tab(path):
        notes = [(n.time, n.duration, n.pitch) for n in gs.track.notes]  # sounding pitches: capo included
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


def half(part: Part) -> int:
    """0 = fit half, 1 = held out; by file name without extension, so format copies of a song stay together."""
    stem = part[0].split("#")[0].rsplit(".", 1)[0].lower()
    return hashlib.sha256(stem.encode()).digest()[0] % 2


def score(parts: list[Part], fn, **kw) -> tuple[int, int, float]:
    """(notes right, notes, seconds)."""
    hit = total = 0
    t0 = time.perf_counter()
    for _, tuning, capo, notes, human in parts:
        pred = fn(notes, tuning=tuning, capo=capo, **kw)
        hit += sum(a == b for a, b in zip(pred, human))
        total += len(human)
    return hit, total, time.perf_counter() - t0


def chunks(parts: list[Part], size: int = 32) -> list[Part]:
    """Parts cut into pieces of `size` onsets: the perceptron updates once per piece, not once per song."""
    out = []
    for name, tuning, capo, notes, human in parts:
        groups = _group_onsets(notes)
        for k in range(0, len(groups), size):
            idx = sorted(i for g in groups[k : k + size] for i in g)
            out.append((name, tuning, capo, [notes[i] for i in idx], [human[i] for i in idx]))
    return out


def fit(parts: list[Part], epochs: int = 3, lr: float = 0.05, seed: int = 0) -> FretCosts:
    """Averaged structured perceptron: decode each piece (human fingering among the candidates); where the
    decoder's fingering differs, move the weights by lr * (features(decoded) - features(human))."""
    rng = random.Random(seed)
    pieces = chunks(parts)
    w = DEFAULT_COSTS.vector()
    w_sum, n_sum = np.zeros_like(w), 0
    for epoch in range(epochs):
        rng.shuffle(pieces)
        wrong, t0 = 0, time.perf_counter()
        for _, tuning, capo, notes, human in pieces:
            n = len(tuning)
            groups, chosen = _decode(notes, tuning, capo, 24, FretCosts.from_vector(w), gold=[(n - s, f) for s, f in human])
            pred: list = [None] * len(notes)
            for g, cand in zip(groups, chosen):
                for k, i in enumerate(g):
                    s, f = cand.assign[k]
                    pred[i] = (n - s, f) if s >= 0 else (-1, -1)
            if pred != list(human):
                wrong += 1
                w = w + lr * (fingering_features(notes, pred, tuning) - fingering_features(notes, human, tuning))
            w_sum += w
            n_sum += 1
        print(f"fit epoch {epoch}: {wrong}/{len(pieces)} pieces differ ({time.perf_counter() - t0:.0f}s)", flush=True)
    return FretCosts.from_vector(w_sum / n_sum)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "FRETTING.md")
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--every", type=int, default=1, help="score every Nth part only (quick iterations; no doc)")
    ap.add_argument("--fit", action="store_true", help="refit the weights on half 0 and print them (no doc)")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()

    gp_files = sorted(p for ext in ("gp3", "gp4", "gp5") for p in args.data.rglob(f"*.{ext}"))
    gp, gp_bad = collect(gp_files, gp_parts)
    tab_files = sorted((args.data / "classtab" / "app" / "tabs").glob("*.txt"))
    tabs, tab_bad = collect(tab_files, ascii_parts)

    costs = DEFAULT_COSTS
    if args.fit:
        costs = fit([p for p in gp + tabs if half(p) == 0], args.epochs)
        print("fitted weights (paste into guitarformer/tab.py _FITTED):")
        print(np.round(costs.vector(), 3).tolist())

    rows = []
    for name, parts in (("Guitar Pro (gp3/4/5)", gp), ("classtab ASCII tabs", tabs)):
        for h, label in ((1, "held out"), (0, "fit half (in-sample)")):
            sel = [p for p in parts if half(p) == h][:: args.every]
            hit, n, dt = score(sel, fret, costs=costs)
            hb, _, _ = score(sel, fret_lowest)
            rows.append((name, label, len(sel), n, hit / max(n, 1), hb / max(n, 1), n / max(dt, 1e-9)))
            print(f"{name}, {label}: {len(sel)} parts, {n} notes: fret() {hit / max(n, 1):.1%}  "
                  f"lowest-fret {hb / max(n, 1):.1%}  ({n / max(dt, 1e-9):,.0f} notes/s)", flush=True)
    print(f"unreadable: {gp_bad} GP files, {tab_bad} ASCII tabs (skipped)")
    if not (args.no_doc or args.fit or args.every > 1):
        write_doc(args.doc, rows, len(gp_files), gp_bad, len(tab_files), tab_bad)


def write_doc(path: Path, rows, n_gp, gp_bad, n_tab, tab_bad) -> None:
    table = "\n".join(
        f"| {name} | {label} | {parts} | {notes} | **{acc:.1%}** | {base:.1%} | {speed:,.0f} |"
        for name, label, parts, notes, acc, base, speed in rows
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""# Fretting: how well `tab.fret()` matches human tabs

Command (from the repository root, with the shared data checked out beside it):

    python scripts/bench_fretting.py               # scores, writes this file
    python scripts/bench_fretting.py --fit         # refits the weights on the fit half, prints the table

Accuracy is the share of notes whose (string, fret) equals the one in the human tab. The lowest-fret
rule (each chord gets the distinct-string assignment with the smallest sum of frets) is computed by the
same script on the same notes. Parts are de-duplicated by note content; ties and dead notes are left out.
Files read: {n_gp} GP files ({gp_bad} unreadable), {n_tab} ASCII tabs ({tab_bad} skipped/unreadable).

Files are split in two halves by a hash of the file name without its extension (the GP test suites
hold one song as .gp3/.gp4/.gp5; those copies stay in one half). The weights in `tab.py` were fit on
half 0 only; **half 1 is held out** and is the number to quote. Half-0 rows are in-sample.

| data | half | parts | notes | fret() | lowest-fret | fret() notes/s |
|---|---|---|---|---|---|---|
{table}

(notes/s: one process on a shared 2-core machine, wall clock; noisy.)

Published anchors (DadaGP, a different and much larger corpus, so not directly comparable): a
Transformer fretting model 81.6%, the lowest-fret rule 79.2%, Guitar Pro 8's own 76.6%.

## The model

`fret()` is a Viterbi pass over onsets. Each onset's chord has candidate fingerings (assignments of its
notes to distinct strings; the 16 cheapest by chord cost kept). A fingering's cost is
`FretCosts.vector() @ fingering_features(...)` plus two fixed terms (1000 per note left without a string,
50 for a chord spanning more than 5 frets). The features (`tab.py` names them) are counts:

- per note: fret (0..24, one-hot), tab string (1..8), and string x fret region (open, 1-4, 5-8, 9-12, 13+);
- per chord: span of its fretted notes (0..5, 6+), unused strings inside its string range;
- per onset pair: hand shift (the lowest fretted fret, carried across open strings) in bins
  0, 1, .., 6, 7-8, 9-12, 13+; frets shifted after a rest; shift of the mean string; for one note to
  one note, the string moving against the pitch, staying on a string, and frets slid along it; strings
  re-used while still sounding; open strings played while the hand sits at fret 5+ and 9+.

The 99 weights are fit by an averaged structured perceptron (`--fit`, 3 epochs over 32-onset pieces of
the half-0 parts; the human fingering is added to the candidates; where the decoded fingering differs,
weights move by 0.05 x (features(decoded) - features(human))). They ship as one table of numbers in
`tab.py` (`_FITTED`), not as data. Tests check that the Viterbi returns the brute-force minimum of this
cost on short lines.

## Honest status

- The 85% target is not met on the held-out GP half; see the table. The held-out GP half is small
  and dominated by two rock/metal songs (Gamma Ray, a prog-metal exercise) whose riffs sit at frets 5-9
  where an open-position fingering of the same pitches exists; both fret() and lowest-fret get under 20%
  of those parts. Nothing in the pitches alone says which a guitarist chose; a per-piece style cue
  (genre, the source's own position markings) would, and is not modelled.
- What the fitting bought, on the same held-out notes: the previous hand-set costs (commit d192c49)
  score 44.1% on held-out GP and 80.6% on held-out classtab; the fitted costs 44.0% and 82.4%. So
  +1.8 points on classtab, nothing on GP. The perceptron also learned to pay back most of the fixed
  `impossible` charge for spans of 6+ frets (weight -18): classical tabs use such stretches (bass note
  plus a high melody note) more often than the hand-set rule allowed.
- Before this version the benchmark handed classtab tabs with a capo to `fret()` with capo 0 while their
  pitches included the capo, so every note of those 40 parts (about 2% of classtab notes) counted as
  wrong for both methods; fixed (GP parts now also pass the track's capo with sounding pitches).
- The GP files are mostly format test suites, not a curated corpus: tiny parts, duplicated songs
  (de-duplicated by content), and some deliberately broken files.
- classtab's string/fret come from our own ASCII reader (`guitarformer/data/ascii_tab.py`); tabs
  whose labels or text give a tuning use it, others are taken as standard tuning.
""")


if __name__ == "__main__":
    main()
