"""Cost of carrying the guitar in the tokens: tokens per note of TabREMI against pitch-only REMI on the same parts,
and how often each technique occurs (per 100 notes) in the sources, with the round-trip agreement.

    python scripts/bench_tab_tokens.py                       # ../shared/data/guitar (GP3-5, GP6-8, ASCII tabs)
    python scripts/bench_tab_tokens.py --limit 300 --out docs/TAB_TOKENS.md.part

Parts without a human fingering (MIDI) get `fret()`'s, as `prepare` gives them.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from guitarformer.config import DataConfig  # noqa: E402
from guitarformer.data.tab_tokens import canonical, technique_tokens  # noqa: E402
from guitarformer.data.tokenization import build_tokenizer, decode_guitar, encode  # noqa: E402
from guitarformer.fretting import fret  # noqa: E402
from guitarformer.music.score import PLAIN  # noqa: E402
from guitarformer.readers import detect_format, read_guitar  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "guitar"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=400, help="files per source kind (GP, ASCII tab, MIDI)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    remi, tab = build_tokenizer(DataConfig(tokenizer="REMI")), build_tokenizer(DataConfig(tokenizer="TabREMI"))
    kinds = {"Guitar Pro": (".gp3", ".gp4", ".gp5", ".gp", ".gpx"), "ASCII tab": (".txt", ".tab"), "MIDI": (".mid", ".midi")}
    rows, techs, notes_all = [], Counter(), 0
    for kind, suffixes in kinds.items():
        files = sorted(p for p in args.data.rglob("*") if p.suffix.lower() in suffixes and detect_format(p))
        random.Random(0).shuffle(files)
        n_notes = n_remi = n_tab = same = parts = 0
        t0 = time.perf_counter()
        for f in files[: args.limit]:
            try:
                read = read_guitar(f)
            except Exception:
                continue
            for gs in read:
                if len(gs.track.notes) < 2:
                    continue
                human = gs.frets is not None
                if not human:
                    gs.frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
                r, t = encode(remi, gs), encode(tab, gs)
                back = decode_guitar(tab, t, gs.tuning, gs.capo, gs.track.program)
                ts = gs.techniques or [PLAIN] * len(gs.track.notes)
                want = Counter((n.pitch, s, fr, canonical(x)) for n, (s, fr), x in zip(gs.track.notes, gs.frets, ts))
                got = Counter((n.pitch, s, fr, x) for n, (s, fr), x in
                              zip(back.track.notes, back.frets or [], back.techniques or [])) if back.frets else Counter()
                n_notes += len(gs.track.notes)
                n_remi += len(r) - 2
                n_tab += len(t) - 2
                same += sum((want & got).values())
                parts += 1
                for x in ts:
                    for token in technique_tokens(x):
                        techs[token.split("_", 1)[1] if token.startswith("Tech_") else "Bend"] += 1
        notes_all += n_notes
        if parts:
            rows.append((kind, parts, n_notes, n_remi / n_notes, n_tab / n_notes, n_tab / n_remi, same / n_notes,
                         time.perf_counter() - t0))
    lines = ["| source | parts | notes | REMI tokens/note | TabREMI tokens/note | TabREMI / REMI | round trip |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for kind, parts, n, rn, tn, ratio, rt, _ in rows:
        lines.append(f"| {kind} | {parts} | {n:,} | {rn:.3f} | {tn:.3f} | **{ratio:.3f}x** | {rt:.2%} |")
    lines += ["", "Techniques in the sources, per 100 notes (as tokens: bend peaks and technique flags):", "",
              "| technique | per 100 notes |", "|---|---:|"]
    for name, c in techs.most_common():
        lines.append(f"| {name} | {100 * c / max(notes_all, 1):.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
