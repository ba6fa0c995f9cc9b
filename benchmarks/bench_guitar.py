"""The shipped model plays guitar: riffs per style against held-out real pieces of that style, measured from notes.

    GUITARFORMER_CACHE=... python benchmarks/bench_guitar.py [--run RUN] [--data DATASET] [--riffs 32] [--bars 8]
        [--out docs/results/GUITAR.md]

Real pieces, never trained on: rock, the Freedoom files in the dataset's test split; classical, the CC-BY-SA
Mutopia pieces (data/guitar_corpora.py TEST_LICENCES, kept out of the built-in corpus); the fiddle styles, their
test-split tunes. Each real piece gives up to 4 windows of --bars bars. Per style: the share of onsets that are
chords (two or more notes at one onset), the share of chord onsets that are power chords (root and fifth, with or
without the octave), the share of palm-muted notes, bars repeating an earlier bar, and the five OA features against
the real-vs-real ceiling; then a style judge fitted on the train split of every style judges the riffs; and the
controls: --palm-mute at its top value (bars with a palm mute), --polyphony chords (bars with a chord), --tuning
drop-d (riffs that play the low D). The page is written whole.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from guitarformer.app import Outputs, SampleRequest, load_run, sample
from guitarformer.data.corpus import builtin_dataset_name, default_dataset_dir
from guitarformer.data.dataset import TokenSplit
from guitarformer.data.guitar_corpora import TEST_LICENCES, classical_files
from guitarformer.evaluation.features import compare, piece_of
from guitarformer.evaluation.form import bar_notes, repeat_share
from guitarformer.evaluation.style import corpus_judge, labelled_tunes, windows
from guitarformer.music.score import GuitarScore
from guitarformer.readers import read_guitar
from guitarformer.training.styles import nats_per_note_by_style

OA_KEYS = ("pitch_class_entropy", "pitch_range", "used_pitch_classes", "notes_per_second", "inter_onset_interval")


def onsets(gs: GuitarScore, bars: float | None = None) -> list[list[int]]:
    """The pitches at each onset of a part (within its first `bars` quarters when given)."""
    by: dict[int, list[int]] = {}
    tpq = gs.score.ticks_per_quarter
    for n in gs.track.notes:
        if bars is None or n.time < bars * tpq:
            by.setdefault(int(n.time), []).append(int(n.pitch))
    return [by[t] for t in sorted(by)]


def is_power_chord(pitches: list[int]) -> bool:
    """Root and fifth, with or without the root's octave(s): the pitch classes {root, root + 7}, both present."""
    root = min(pitches)
    classes = {(p - root) % 12 for p in pitches}
    return classes == {0, 7}


def texture(parts: list[GuitarScore]) -> dict:
    """Chord onsets, power-chord share of them and palm-muted notes over these parts."""
    chords = power = total = notes = muted = 0
    for gs in parts:
        for group in onsets(gs):
            total += 1
            if len(set(group)) >= 2:
                chords += 1
                power += is_power_chord(group)
        notes += len(gs.track.notes)
        muted += sum(t.palm_mute for t in gs.techniques or [])
    return {"onsets": total, "chord_share": chords / max(total, 1), "power_share": power / max(chords, 1),
            "palm_mute_share": muted / max(notes, 1), "chord_onsets": chords}


def bars_with(gs: GuitarScore, test) -> float:
    """The share of a riff's bars (its meter's length) that hold a note group passing `test`."""
    tpq = gs.score.ticks_per_quarter
    ts = gs.score.time_signatures[0] if len(gs.score.time_signatures) else None
    bar = int(tpq * (ts.numerator * 4 / ts.denominator if ts else 4))
    last = max((n.time + n.duration for n in gs.track.notes), default=0)
    n_bars = max(1, -(-last // bar))
    hit = set()
    groups: dict[int, list] = {}
    for n, t in zip(gs.track.notes, gs.techniques or [None] * len(gs.track.notes)):
        groups.setdefault(int(n.time), []).append((n, t))
    for t, g in groups.items():
        if test(g):
            hit.add(t // bar)
    return len(hit) / n_bars


def real_parts(style: str, dataset: Path, limit: int) -> list[GuitarScore]:
    """Held-out real parts of a style (see the module's docstring), read as users' files are."""
    if style == "classical":
        files = classical_files(TEST_LICENCES)
    else:
        files = [f for f, s in zip(*labelled_tunes(dataset, "test")) if s == style]
    parts = []
    for f in files[:limit]:
        try:
            parts.extend(read_guitar(f))
        except Exception as e:  # a file the reader refuses is left out of the reference, and said
            print(f"  reference {f.name}: {e}", file=sys.stderr)
    return parts


def riffs(loaded, args, **asked) -> list[GuitarScore]:
    req = SampleRequest.of(outputs=Outputs(), num_samples=args.riffs, bars=args.bars, seed=args.seed,
                        device=args.device, **asked)
    return [r.gs for r in sample(req, loaded).riffs]


def pieces(parts: list[GuitarScore], bars: int, most: int = 4):
    out = []
    for gs in parts:
        p = piece_of(gs.score, gs.tuning)
        out.extend(windows(p, bars, most) if most else [p])
    return [p for p in out if len(p.pitch)]


def repeats(parts: list[GuitarScore], bars: int) -> float:
    shares = [s for gs in parts if (s := repeat_share(bar_notes(gs.score, bars))) is not None]
    return float(np.mean(shares)) if shares else float("nan")


def style_rows(loaded, args, dataset, styles, judge) -> list[dict]:
    rows = []
    for style in styles:
        real = real_parts(style, dataset, args.real_limit)
        made = riffs(loaded, args, style=style)
        oa = compare(pieces(made, args.bars, 0), pieces(real, args.bars))
        said = Counter(judge.predict_many(pieces(made, args.bars, 0))) if judge else Counter()
        rows.append({"style": style, "real_parts": len(real), "real": texture(real), "riffs": texture(made),
                     "repeat_real": repeats(real, 16), "repeat_riffs": repeats(made, args.bars),
                     "oa": {k: (oa[k]["oa"], oa[k]["oa_ceiling"]) for k in OA_KEYS},
                     "judged": dict(said), "judged_as_asked": said[style] / max(1, sum(said.values()))})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def control_rows(loaded, args) -> dict:
    out = {}
    muted = riffs(loaded, args, style="rock", palm_mute="high")
    out["palm_mute_high_bars"] = float(np.mean([bars_with(g, lambda g: any(t and t.palm_mute for _, t in g))
                                                for g in muted]))
    chords = riffs(loaded, args, polyphony="chords")
    out["polyphony_chords_bars"] = float(np.mean([bars_with(g, lambda g: len({n.pitch for n, _ in g}) >= 2)
                                                  for g in chords]))
    drop = riffs(loaded, args, style="rock", tuning="drop-d")
    out["drop_d_low_d_riffs"] = float(np.mean([any(n.pitch == 38 for n in g.track.notes) for g in drop]))
    out["drop_d_tunings"] = dict(Counter(str(g.tuning) for g in drop))
    print(json.dumps(out), flush=True)
    return out


def page(args, loaded, rows, controls, ceiling, elapsed) -> str:
    def pct(v):
        return f"{v:.1%}"

    lines = ["# The model in the box plays guitar", "",
             "Written whole by `benchmarks/bench_guitar.py` "
             f"(`--riffs {args.riffs} --bars {args.bars} --seed {args.seed}`, {args.device}, {elapsed:.0f} s).", "",
             f"Model: {args.run or 'the shipped model'} at step {loaded.step}. Real pieces held out of training: rock "
             "= the Freedoom files of the test split, classical = the CC-BY-SA Mutopia pieces, fiddle styles = their "
             "test tunes; up to 4 windows of each.", "",
             "| style | real parts | chord onsets real / riffs (ratio) | power chords of chord onsets real / riffs "
             "(ratio) | palm-muted notes real / riffs | bars repeating real / riffs | judged as asked |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        re_, ri = r["real"], r["riffs"]
        cr = ri["chord_share"] / re_["chord_share"] if re_["chord_share"] else float("nan")
        pr = ri["power_share"] / re_["power_share"] if re_["power_share"] else float("nan")
        lines.append(f"| {r['style']} | {r['real_parts']} | {pct(re_['chord_share'])} / {pct(ri['chord_share'])} "
                     f"({cr:.2f}x) | {pct(re_['power_share'])} / {pct(ri['power_share'])} ({pr:.2f}x) | "
                     f"{pct(re_['palm_mute_share'])} / {pct(ri['palm_mute_share'])} | {pct(r['repeat_real'])} / "
                     f"{pct(r['repeat_riffs'])} | {pct(r['judged_as_asked'])} |")
    lines += ["", "OA of the riffs against the real pieces, as a ratio of the real-vs-real ceiling:", "",
              "| style | " + " | ".join(OA_KEYS) + " |", "|---|" + "---|" * len(OA_KEYS)]
    for r in rows:
        lines.append(f"| {r['style']} | " + " | ".join(
            f"{a:.2f}/{c:.2f} ({a / c:.2f}x)" if c else "-" for a, c in (r["oa"][k] for k in OA_KEYS)) + " |")
    lines += ["", f"Style judge (evaluation/style.py), fitted on the train split of every style; its accuracy on "
                  f"the val pieces: {pct(ceiling.overall)} (balanced {pct(ceiling.balanced)}); per style: "
                  + ", ".join(f"{s} {a / n:.0%} of {n}" for s, (a, n) in ceiling.per_style.items()) + ".", "",
              "Controls:", "",
              f"- `--style rock --palm-mute high`: bars with a palm-muted note {pct(controls['palm_mute_high_bars'])}",
              f"- `--polyphony chords`: bars with a chord {pct(controls['polyphony_chords_bars'])}",
              f"- `--style rock --tuning drop-d`: riffs that play the low D {pct(controls['drop_d_low_d_riffs'])}",
              "", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=None, help="default: the shipped model")
    ap.add_argument("--data", type=Path, default=None, help="default: the built-in dataset of the run's data config")
    ap.add_argument("--riffs", type=int, default=32)
    ap.add_argument("--bars", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--real-limit", type=int, default=200)
    ap.add_argument("--styles", default="rock,classical,reel,jig")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=Path("docs/results/GUITAR.md"))
    args = ap.parse_args(argv)
    t0 = time.time()
    loaded = load_run(args.run, None, args.device)
    dataset = args.data or default_dataset_dir().parent / builtin_dataset_name(loaded.cfg.data)
    fitted = corpus_judge(dataset)
    nll = nats_per_note_by_style(loaded.model, loaded.tokenizer, TokenSplit(dataset, "val"),
                                 loaded.cfg.model.block_size, loaded.device)
    print(json.dumps(nll), flush=True)
    rows = style_rows(loaded, args, dataset, args.styles.split(","), fitted.judge)
    controls = control_rows(loaded, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page(args, loaded, rows, controls, fitted.ceiling, time.time() - t0) + "\n".join(
        ["Nats per note on the val split, per style (every token but the controls scored):", "",
         "| style | notes | nats / note |", "|---|---|---|"]
        + [f"| {s} | {n:,} | {v:.3f} |" for s, (v, n) in nll.items()]) + "\n")
    (args.out.with_suffix(".json")).write_text(json.dumps({"styles": rows, "controls": controls, "nll": nll},
                                                          indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
