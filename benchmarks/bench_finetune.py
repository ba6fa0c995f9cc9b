"""Fine-tuning the shipped model on a few dozen tabs, measured: which recipe (steps, learning rate) learns.

A user's first day, replayed on real tabs: a fixed, seeded choice of ASCII and Guitar Pro files from the shared guitar
data (the rock-ish Guitar Pro songs that can be told by name, the rest classical ASCII tabs), shuffled and split in
two halves; each half is staged in a temporary folder as one new style (`mytabs/`) and prepared with `--like
pretrained`. The first half trains, the second is held out. Each recipe is compared with the shipped model as it is
and with the same steps from random weights:

- held-out NLL: nats per note over the whole held-out half's plain stream (no control tokens), as training validates;
- riffs: `sample --run RUN --style mytabs --bars 8`, 16 riffs, against the held-out tabs: rest share (the share of
  bar time with nothing sounding), fret leaps between consecutive notes on a string and hand-position jumps
  (median and 90th percentile), notes per bar; and two controls, `--density high` and `--palm-mute high` (16 riffs
  each): the share of bars measured as asked.

    python benchmarks/bench_finetune.py [--steps 60] [--sweep 60:3e-3,60:1e-3,...] [--riffs 16] [--out
        docs/results/FINETUNE.md]

The files are copied into a temporary folder (never into the repository) and removed afterwards. The page is
written whole.
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from guitarformer.app import Outputs, SampleRequest, load_run, sample
from guitarformer.config import load_config, set_values
from guitarformer.vocab.controls import controls_per_bar, notes_of
from guitarformer.data.dataset import PLAIN, DecoderWindows, TokenSplit, note_ids
from guitarformer.data.prepare import PrepareOptions, prepare
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.models.kinds import kind_of
from guitarformer.models.loss import nll
from guitarformer.readers import read_guitar
from guitarformer.training.init import init_config, load_init
from guitarformer.training.loop import train

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "guitar"
STYLE = "mytabs"
GP = (".gp3", ".gp4", ".gp5", ".gpx", ".gp")
# Guitar Pro files whose names say rock or metal songs (or a palm-muted riff); the others in the shared data are
# mostly one-feature test files.
ROCKISH = re.compile(r"maiden|gamma|zeppelin|metal|comfortably|funky|palm-mute|full-song|demo v5", re.I)
SPLITS = ("train", "val", "test")


# ---------------------------------------------------------------- the files


def choose_files(root: Path, count: int, seed: int) -> tuple[list[Path], list[Path]]:
    """`count` files: every rock-ish Guitar Pro file (one per name), the rest ASCII tabs drawn with `seed`;
    shuffled with `seed` and split in halves (train, held out)."""
    gp, stems = [], set()
    for p in sorted(root.rglob("*")):
        if p.suffix.lower() in GP and ROCKISH.search(p.name) and p.stem.lower() not in stems:
            stems.add(p.stem.lower())
            gp.append(p)
    rng = random.Random(seed)
    txt = sorted(p for p in root.rglob("*.txt") if p.parent.name == "tabs")
    files = gp + rng.sample(txt, max(0, count - len(gp)))
    rng.shuffle(files)
    return files[0::2], files[1::2]


def staged(files: list[Path], folder: Path) -> Path:
    """`files` copied into folder/mytabs (the folder names their style); returns `folder`."""
    (folder / STYLE).mkdir(parents=True)
    for i, f in enumerate(files):
        shutil.copy(f, folder / STYLE / f"{i:02d}-{f.name}")
    return folder


def prepared(folder: Path, out: Path) -> dict:
    """`guitarformer prepare FOLDER --like pretrained --out OUT`."""
    init = load_init("pretrained")
    data = init.cfg.data
    data.dataset = None
    return prepare([folder], out, data, options=PrepareOptions(progress=False), like=init.tokenizer)


# ---------------------------------------------------------------- held-out likelihood


def heldout_nll(model, dataset: Path, block_size: int) -> float:
    """Nats per note over every split of `dataset` (the held-out half), on the plain stream, as training
    validates (training/loop.py evaluate)."""
    tokenizer = load_tokenizer(dataset / "tokenizer.json")
    notes = torch.from_numpy(note_ids(tokenizer))
    kind = kind_of(model)
    total, count = 0.0, 0
    for split in SPLITS:
        part = TokenSplit(dataset, split)
        if len(part) < 2:
            continue
        counted = [0]

        def batches(windows):
            for b in windows.eval_batches(8):
                inputs = kind.inputs(b)
                counted[0] += int(torch.isin(inputs.targets, notes).sum())
                yield inputs

        r = nll(model, batches(DecoderWindows(part, block_size, control_dropout=PLAIN)), torch.device("cpu"))
        total += r["nll"] * r["tokens"]
        count += counted[0]
    return total / count


# ---------------------------------------------------------------- what the notes are like


@dataclass
class Notes:
    """One piece's notes as the riff measures see them: onset groups with their fretted frets, per-string frets."""

    rest: float  # share of the piece's bar time with nothing sounding
    bars: float
    notes: int
    string_leaps: list[int] = field(default_factory=list)
    position_jumps: list[int] = field(default_factory=list)
    bar_values: list[dict[str, str]] = field(default_factory=list)  # each bar's measured controls


def measured(gs, bars: int | None = None) -> Notes:
    """What a guitar part's notes are like: its rest share over `bars` bars (None: the bars its notes reach), its
    leaps and each bar's control values (vocab/controls.py)."""
    tpq = gs.score.ticks_per_quarter
    sigs = [(ts.time, ts.numerator, ts.denominator) for ts in gs.score.time_signatures] or [(0, 4, 4)]
    bar_ticks = tpq * 4 * sigs[0][1] // sigs[0][2]
    played = sorted(notes_of(gs), key=lambda n: (n.onset, n.string))
    end = max((n.onset + n.duration for n in played), default=0)
    n_bars = max(bars or 0, math.ceil(end / bar_ticks), 1)
    sounding = np.zeros(n_bars * bar_ticks, dtype=bool)
    for n in played:
        sounding[n.onset: n.onset + n.duration] = True
    out = Notes(rest=1.0 - float(sounding.mean()), bars=n_bars, notes=len(played),
                bar_values=[b for b in controls_per_bar(played, tpq, sigs) if b])
    last: dict[int, int] = {}
    groups: dict[int, list[int]] = {}
    for n in played:
        if n.fret > 0:  # an open string asks nothing of the hand
            if n.string in last:
                out.string_leaps.append(abs(n.fret - last[n.string]))
            last[n.string] = n.fret
            groups.setdefault(n.onset, []).append(n.fret)
    positions = [min(frets) for _, frets in sorted(groups.items())]
    out.position_jumps = [abs(b - a) for a, b in zip(positions, positions[1:])]
    return out


def summary(pieces: list[Notes]) -> dict[str, float]:
    """The measures over pieces: rest share (bar time weighted), leap and jump quantiles, notes per bar."""
    bars = sum(p.bars for p in pieces)
    leaps = [x for p in pieces for x in p.string_leaps]
    jumps = [x for p in pieces for x in p.position_jumps]

    def q(xs, at):
        return float(np.percentile(xs, at)) if xs else math.nan

    return {"rest": sum(p.rest * p.bars for p in pieces) / bars, "notes_per_bar": sum(p.notes for p in pieces) / bars,
            "leap_median": q(leaps, 50), "leap_p90": q(leaps, 90), "jump_median": q(jumps, 50),
            "jump_p90": q(jumps, 90)}


def share(pieces: list[Notes], control: str, value: str) -> float:
    """The share of the pieces' bars with notes whose `control` measures `value`."""
    values = [b.get(control) for p in pieces for b in p.bar_values]
    return sum(v == value for v in values) / max(len(values), 1)


# ---------------------------------------------------------------- recipes


@dataclass
class Recipe:
    """A run to compare: from the shipped model's weights (`init`) or random ones, `steps` steps at peak `lr`."""

    init: bool
    steps: int
    lr: float

    @property
    def name(self) -> str:
        return f"{'fine-tune' if self.init else 'random weights'}, {self.steps} steps, lr {self.lr:g}"

    @staticmethod
    def parse(text: str) -> "Recipe":
        start, steps, lr = text.split(":")
        if start not in ("init", "scratch"):
            raise argparse.ArgumentTypeError(f"recipe {text!r}: start with init: or scratch:")
        return Recipe(start == "init", int(steps), float(lr))


def trained(recipe: Recipe, dataset: Path, run_dir: Path, threads: int) -> tuple[Path, float]:
    """Train `recipe` on `dataset` (the shipped model's architecture, token settings and training mix either way);
    returns the run directory and the seconds it took."""
    values = {"data.dataset": str(dataset), "train.max_steps": recipe.steps, "train.lr": recipe.lr,
              "train.init": "pretrained", "train.time_budget_min": 0.0, "train.eval_interval": recipe.steps,
              "train.sample_interval": 0, "train.num_threads": threads}
    cfg = set_values(load_config(), values)
    if not recipe.init:  # the same architecture and mix as the fine-tune, from random weights
        cfg = set_values(init_config(cfg, load_init("pretrained")), {"train.init": None})
    t0 = time.time()
    train(cfg, run_dir=run_dir, progress=False, force=True)
    return run_dir, time.time() - t0


RIFF_ASKS = {"plain": {}, "density high": {"density": "high"}, "hand position 5": {"hand_position": 5}}
ADHERENCE = {"density high": ("Density", "high"), "hand position 5": ("Pos", "5-9")}


def riffs(run: str | Path, style: str | None, count: int, bars: int, seed: int) -> dict[str, list[Notes]]:
    """`count` riffs of `bars` bars per ask in RIFF_ASKS (with `style` where given), measured."""
    loaded = load_run(run, None, "cpu")
    out = {}
    for ask, options in RIFF_ASKS.items():
        req = SampleRequest.of(outputs=Outputs(), num_samples=count, bars=bars, seed=seed, style=style, device="cpu",
                               **options)
        out[ask] = [measured(r.gs, bars) for r in sample(req, loaded).riffs]
    return out


def scored(run: str | Path, style: str | None, held: Path, args) -> dict[str, float]:
    """A model's row: held-out nats per note, its plain riffs' measures and both controls' adherence."""
    loaded = load_run(run, None, "cpu")
    row = {"nll": heldout_nll(loaded.model, held, loaded.cfg.model.block_size)}
    made = riffs(run, style, args.riffs, args.bars, args.seed)
    row.update(summary(made["plain"]))
    for ask, (control, value) in ADHERENCE.items():
        row[ask] = share(made[ask], control, value)
        row[ask + " unasked"] = share(made["plain"], control, value)
    return row


def reference(files: list[Path]) -> dict[str, float]:
    """The held-out tabs' own measures (every guitar part of each readable file)."""
    pieces = []
    for f in files:
        try:
            pieces += [measured(gs) for gs in read_guitar(f) if len(gs.track.notes)]
        except Exception as e:  # dirt in the shared data: a broken file is reported and passed over
            print(f"skipped {f.name}: {e}", file=sys.stderr)
    row = summary(pieces)
    for ask, (control, value) in ADHERENCE.items():
        row[ask + " unasked"] = share(pieces, control, value)
    return row


# ---------------------------------------------------------------- the page


def cells(row: dict[str, float]) -> str:
    def f(key, fmt):
        v = row.get(key)
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    adher = " | ".join(f"{f(a, '.0%')} ({f(a + ' unasked', '.0%')})" if a in row else f"({f(a + ' unasked', '.0%')})"
                       for a in ADHERENCE)
    return (f"{f('nll', '.3f')} | {f('rest', '.0%')} | {f('notes_per_bar', '.1f')} | {f('leap_median', '.0f')} / "
            f"{f('leap_p90', '.0f')} | {f('jump_median', '.0f')} / {f('jump_p90', '.0f')} | {adher}")


def closeness(row: dict[str, float], ref: dict[str, float]) -> float:
    """Mean relative distance of a model's riff measures from the held-out tabs' (rest, notes per bar, leap and
    jump 90th percentiles): 0 is the tabs' own."""
    keys = ("rest", "notes_per_bar", "leap_p90", "jump_p90")
    return sum(abs(row[k] - ref[k]) / max(abs(ref[k]), 1e-9) for k in keys) / len(keys)


def page(args, files: tuple[list[Path], list[Path]], meta: tuple[dict, dict], rows: list, ref: dict,
         seconds: float) -> list[str]:
    """docs/results/FINETUNE.md, whole."""
    train_files, held_files = files
    cmd = "python benchmarks/bench_finetune.py " + " ".join(
        [f"--files {args.files}", f"--seed {args.seed}", f"--riffs {args.riffs}", f"--bars {args.bars}",
         "--recipes " + ",".join(f"{'init' if r.init else 'scratch'}:{r.steps}:{r.lr:g}" for r in args.recipes)])
    lines = ["# Fine-tuning the shipped model on a few dozen tabs", "",
             "Written whole by `benchmarks/bench_finetune.py`.", "", f"    {cmd}", "",
             f"Machine: {platform.machine()}, {args.threads} torch threads on a 2-core CPU shared with "
             f"other jobs, torch {torch.__version__}; the whole run took {seconds / 60:.1f} min.", "",
             f"Data: {len(train_files) + len(held_files)} files of the shared guitar data, chosen with seed "
             f"{args.seed}: every Guitar Pro file whose name says a rock or metal song or a palm-muted riff, the rest "
             "classical ASCII tabs (ClassTab); shuffled and halved. Each half is one new style (`mytabs/`), prepared "
             "with `--like pretrained`.", ""]
    for label, names, m in (("train half", train_files, meta[0]), ("held-out half", held_files, meta[1])):
        gp = sum(p.suffix.lower() in GP for p in names)
        lines.append(f"- {label}: {len(names)} files ({gp} Guitar Pro, {len(names) - gp} ASCII tab), "
                     f"{m['status'].get('ok', 0)} read, {sum(m['tokens'].values()):,} tokens")
    lines += ["", "Every run trains the shipped model's architecture, token settings and training mix with the default "
              "preset's batch (8 windows of 1,024 tokens), warm-up at most a tenth of the steps, cosine decay to "
              "1e-4; `random weights` starts the same network from scratch.", "",
              f"Columns: held-out nats per note (all of the held-out half, plain stream); then {args.riffs} riffs of "
              f"{args.bars} bars (`sample --style mytabs --bars {args.bars}`; the shipped model, which has no such "
              "style, asked for none): rest share (bar time with nothing sounding), notes per bar, fret leap between "
              "consecutive fretted notes on one string and hand-position jump between consecutive fretted onsets "
              "(lowest fret), median / 90th percentile; then the share of bars measured as asked for `--density "
              f"high` and `--hand-position 5` ({args.riffs} riffs each), in brackets the share among the plain riffs.",
              "",
              "| model | train s | held-out nats/note | rest | notes/bar | string leap med / p90 | position jump med / "
              "p90 | density high (unasked) | position 5-9 (unasked) |", "|---|---|---|---|---|---|---|---|---|",
              f"| held-out tabs | - | {cells(ref)} |"]
    for name, secs, row in rows:
        lines.append(f"| {name} | {secs:.0f} | {cells(row)} |")
    tunes = [(n, r) for n, _, r in rows if n.startswith("fine-tune")]
    if tunes:
        best_nll = min(tunes, key=lambda t: t[1]["nll"])
        close = min(tunes, key=lambda t: closeness(t[1], ref))
        lines += ["", f"Lowest held-out NLL among the fine-tunes: **{best_nll[0]}** ({best_nll[1]['nll']:.3f} nats per "
                      f"note). Riffs closest to the held-out tabs (mean relative distance of rest share, notes per bar "
                      f"and the two 90th percentiles): **{close[0]}** ({closeness(close[1], ref):.2f}; "
                      + ", ".join(f"{n}: {closeness(r, ref):.2f}" for n, r in tunes) + ")."]
    lines += ["", "What `train --init` does by default, chosen from these numbers: docs/training.md, \"Fine-tune the "
              "shipped model\"."]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SHARED)
    ap.add_argument("--files", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--recipes", type=lambda s: [Recipe.parse(x) for x in s.split(",")],
                    default=[Recipe(True, 40, 3e-3), Recipe(True, 40, 1e-3), Recipe(True, 80, 1e-3),
                             Recipe(True, 40, 3e-4), Recipe(False, 40, 3e-3)])
    ap.add_argument("--riffs", type=int, default=16)
    ap.add_argument("--bars", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "FINETUNE.md")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        ap.error(f"{args.data} is not a folder of guitar files")
    t0 = time.time()
    torch.set_num_threads(args.threads)
    train_files, held_files = choose_files(args.data, args.files, args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-finetune-") as tmp:
        work = Path(tmp)
        meta = (prepared(staged(train_files, work / "train"), work / "d-train"),
                prepared(staged(held_files, work / "held"), work / "d-held"))
        held = work / "d-held"
        ref = reference(held_files)
        rows = [("shipped model", 0.0, scored("pretrained", None, held, args))]
        print(f"shipped: {rows[-1][2]}", flush=True)
        for i, recipe in enumerate(args.recipes):
            run, secs = trained(recipe, work / "d-train", work / f"run-{i}", args.threads)
            rows.append((recipe.name, secs, scored(run, STYLE, held, args)))
            print(f"{recipe.name}: {secs:.0f} s {rows[-1][2]}", flush=True)
    args.out.write_text("\n".join(page(args, (train_files, held_files), meta, rows, ref, time.time() - t0)) + "\n")
    print(f"wrote {args.out} ({(time.time() - t0) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
