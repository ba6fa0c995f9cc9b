"""How many notes a rule for the unsaid string would leave a String token: the lead for a tab layout after 3.

    python benchmarks/bench_string_rules.py DATASET [DATASET ...] [--split val]

Tab layout 3 (vocab/tab_tokens.py) writes a note's String only where the note leaves its lowest-fret string, a rule
of the pitch alone. A guitarist's string mostly follows the hand instead: the fret nearest to where the hand is.
This script reads a prepared TabREMI dataset (the human or fret() fingering its files carry), notes in token order
with their strings, and counts the share of notes each rule names right, i.e. the notes that would need no String:

- lowest fret: layout 3's rule (`lowest_fret_string`);
- hand in the bar: the hand is the mean fret of the bar's last two fretted notes; an open string where the pitch is
  one and the hand is at fret 5 or lower, else the fretted string nearest the hand (ties: the lower fret). The bar's
  first notes, before any fretted one, take the lowest-fret rule, so the rule never reads past a Bar and a window
  cut at any Bar decodes alone. Nothing of it is built; this measures what it would save.
- again in the bar: a pitch already played in the bar takes the string it took last (a riff's repeated notes, an
  arpeggio's strings); any other note the hand-in-the-bar string. Bar-local too. Built once as tab layout 4 and
  measured: fewer tokens, worse nats per note on the corpus and on human tabs (docs/results/TAB_TOKENS.md, "Layout 4").

Each piece's tuning and capo come from its opening CtrlTuning/CtrlCapo; a piece without them is read in standard
tuning, and one whose tuning is "other" is left out (its open strings are not in the tokens).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from guitarformer.data.dataset import TokenSplit, dataset_tokenizer  # noqa: E402
from guitarformer.vocab.tab_tokens import closes_note, decode_tab, lowest_fret_string, strip_controls  # noqa: E402
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS, fret_of  # noqa: E402

HAND_NOTES = 2  # fretted notes of the bar the hand position averages
OPEN_UP_TO = 5  # an open string is the hand's choice up to this fret


def hand_string(pitch: int, frets: list[int], tuning: tuple[int, ...], capo: int) -> int:
    """The string the hand-in-the-bar rule names for `pitch`, given the bar's frets so far (module docstring)."""
    fretted = [f for f in frets if f > 0][-HAND_NOTES:]
    if not fretted:
        return lowest_fret_string(tuning, capo, pitch)
    hand = float(np.mean(fretted))
    cand = [(f, s) for s in range(1, len(tuning) + 1) if (f := fret_of(pitch, s, tuning, capo)) >= 0]
    if not cand:
        return lowest_fret_string(tuning, capo, pitch)
    opens = [c for c in cand if c[0] == 0]
    if opens and hand <= OPEN_UP_TO:
        return opens[0][1]
    return min([c for c in cand if c[0] > 0] or cand, key=lambda c: (abs(c[0] - hand), c[0]))[1]


def piece_guitar(toks: list[str]) -> tuple[tuple[int, ...], int] | None:
    """(tuning, capo) from a piece's opening controls; None for a tuning the tokens call "other"."""
    tuning, capo = STANDARD_TUNING, 0
    for t in toks[:8]:
        if t.startswith("CtrlTuning_"):
            name = t.split("_", 1)[1]
            if name not in TUNINGS:
                return None
            tuning = TUNINGS[name]
        elif t.startswith("CtrlCapo_"):
            capo = int(t.split("_", 1)[1])
    return tuning, capo


def count(dataset: Path, split: str) -> dict[str, int]:
    sp = TokenSplit(dataset, split)
    tok = dataset_tokenizer(sp)
    velocities = bool(tok.config.use_velocities)
    n = {"notes": 0, "lowest fret": 0, "hand in the bar": 0, "again in the bar": 0, "pieces left out": 0}
    for i in range(sp.num_sequences):
        raw = [int(x) for x in sp.sequence(i)]
        guitar = piece_guitar([tok[x] for x in raw])
        if guitar is None:
            n["pieces left out"] += 1
            continue
        ids = [x for x in strip_controls(tok, raw) if not tok[x].startswith(("BOS", "EOS", "PAD"))]
        toks = [tok[x] for x in ids]
        bars, bar = [], -1  # the bar of each whole note, in token order
        for j, t in enumerate(toks):
            if t.startswith("Bar_"):
                bar += 1
            elif closes_note(toks, j, velocities):
                bars.append(bar)
        score, strings, _ = decode_tab(tok, ids, guitar)
        notes = score.tracks[0].notes if score.tracks else []
        frets, played, at = [], {}, None
        for note, s, b in zip(notes, strings, bars):
            if b != at:
                frets, played, at = [], {}, b
            if s <= 0 or fret_of(note.pitch, s, *guitar) < 0:
                continue
            n["notes"] += 1
            n["lowest fret"] += s == lowest_fret_string(*guitar, note.pitch)
            hand = hand_string(note.pitch, frets, *guitar)
            n["hand in the bar"] += s == hand
            n["again in the bar"] += s == played.get(note.pitch, hand)
            frets.append(fret_of(note.pitch, s, *guitar))
            played[note.pitch] = s
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", type=Path, nargs="+")
    ap.add_argument("--split", default="val", choices=["train", "val", "test"])
    args = ap.parse_args()
    print(f"| dataset ({args.split}) | notes | on the lowest-fret string (layout 3) | on the hand-in-the-bar string | "
          "on the again-in-the-bar string | String tokens, hand / lowest | again / lowest |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for d in args.datasets:
        n = count(d, args.split)
        lo, hand, again = (n[k] / n["notes"] for k in ("lowest fret", "hand in the bar", "again in the bar"))
        left = f" ({n['pieces left out']} pieces in an 'other' tuning left out)" if n["pieces left out"] else ""
        print(f"| {d.name}{left} | {n['notes']:,} | {lo:.1%} | {hand:.1%} | {again:.1%} | "
              f"{(1 - hand) / (1 - lo):.2f}x | {(1 - again) / (1 - lo):.2f}x |")


if __name__ == "__main__":
    main()
