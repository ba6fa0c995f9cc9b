"""Release the shipped model: prepare, train, measure and export it into guitarformer/pretrained/.

One command makes the model `guitarformer sample` and `guitarformer infill` use when the user names no run:

  1. the built-in corpus (public-domain fiddle tunes inside music21, Mutopia's PD and CC-BY classical guitar pieces,
     Freedoom's BSD-3 guitar parts; no other data, whatever its licence) prepared with controls: styles are the
     tunes' types, "classical" and "rock", keys the tunes' K: fields or estimated (data/corpus.py);
  2. the decoder trained with controls and infilling in the mix (`--minutes` of training on the GPU when there is
     one, else on the CPU: a long run);
  3. measured: val NLL per token and per note; control adherence (benchmarks/bench_controls.py, beside unconditioned
     riffs); infilling (benchmarks/bench_infill.py: NLL given both sides vs the left only, OA of filled bars vs
     copying the bars before); form (evaluation/form.py: the share of the first 16 bars that repeat an earlier bar,
     in sampled riffs and in the built-in test tunes);
  4. exported (runs/export.py: best weights in half precision where full precision passes 10 MB, config,
     tokenizer) with MODEL_CARD.md written from the measured numbers;
  5. with --encdec, the encoder-decoder trained and measured the same way (its scores go into the card; only the
     decoder ships).

    python tools/release_model.py --minutes 15                  # the release (GPU: about 15 min + benches)
    python tools/release_model.py --minutes 15 --encdec --docs  # also the encoder-decoder; docs/results/CONTROLS.md, INFILL.md
    python tools/release_model.py --from-run runs/qs --docs     # measure and ship a run `guitarformer train` made
    python tools/release_model.py --from-run runs/qs --encdec --encdec-run runs/qs-encdec --docs  # and measure an
        # encoder-decoder `guitarformer train --config encdec-small --set data.controls=true --set data.infill=0.3` made
    python tools/release_model.py --config tiny --limit 4 --steps 6 --out /tmp/pre --controls tempo \\
        --num-samples 1 --bars 1 --num-infill 2 --form-samples 1       # the end-to-end check (tests/tools/test_release_model.py)

Everything the run made stays in --work (runs, the benches' tables, release.json with every number). The release
commit adds the model's files to pyproject.toml's package data with them (tests/package/test_api.py holds every package-data
pattern to a tracked file, so the line cannot come before the files):

    "guitarformer.pretrained" = ["ckpt/best.pt", "config.yaml", "tokenizer.json", "MODEL_CARD.md"]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import symusic
import torch

from guitarformer.config import Config, load_config
from guitarformer.vocab.controls import PlayedNote, estimate_key
from guitarformer.data.corpus import (
    COLLECTIONS,
    CORPUS_VERSION,
    build_corpus,
    corpus_labels,
    ensure_builtin_dataset,
    labels_taken,
)
from guitarformer.data.dataset import TokenSplit
from guitarformer.data.guitar_corpora import FREEDOOM, classical_credits
from guitarformer.data.prepare import load_meta
from guitarformer.vocab.seen import read_seen, write_seen
from guitarformer.compose.form import forms_of_dataset, write_forms
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.evaluation.form import FORM_BARS, form_report
from guitarformer.app import Outputs, SampleRequest, load_run, sample
from guitarformer.runs.run import count_dataset
from guitarformer.evaluation.features import length_matched, notes_per_second, piece_of
from guitarformer.evaluation.reference import reference_from_split
from guitarformer.pretrained import pretrained_dir
from guitarformer.runs.export import export_run
from guitarformer.runs import load_run, read_run
from guitarformer.runtime import resolve_device
from guitarformer.training.loop import train

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
# The recipe beside each config: controls and infilling in the mix, as issue 26 asks of the default model.
RECIPE = ["data.controls=true", "data.infill=0.3"]
KINDS = {"decoder": "decoder-small", "encoder_decoder": "encdec-small"}
NOTE_TOKEN = "Pitch"  # one per note in TabREMI and REMI: tokens per note = tokens / Pitch tokens


@dataclass
class Scores:
    """What one trained model measured."""

    kind: str
    config: str
    run: str
    steps: int
    train_seconds: float
    device: str
    val_nll_token: float
    val_nll_note: float
    controls: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> asked, unconditioned
    infill: dict = field(default_factory=dict)
    form: dict[str, float] = field(default_factory=dict)
    meter: dict[str, float] = field(default_factory=dict)  # notes per second in its own meters and drawn ones


def _script(name: str):
    """A script of benchmarks/ as a module (they are scripts, not a package)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))  # what a benchmark imports beside it (harness)
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def release_config(name: str, args) -> Config:
    """A named config with the release recipe, the corpus limit and the training budget of the command line."""
    cfg = load_config(name, [*RECIPE, *args.set])
    if args.limit:
        cfg.data.corpus_limit = args.limit
    cfg.train.device = args.device
    cfg.train.seed = args.seed
    if args.steps:
        cfg.train.max_steps = args.steps
    else:  # --minutes: as many steps as fit (time_budget_min fits max_steps to the machine and stops on the clock)
        cfg.train.max_steps = max(cfg.train.max_steps, args.max_steps)
        cfg.train.time_budget_min = args.minutes
    return cfg


def val_nll_per_note(dataset: Path, nll_token: float) -> float:
    """Nats per note from nats per token: times the val split's tokens per note (val tokens / Pitch tokens)."""
    tok = load_tokenizer(dataset / "tokenizer.json")
    ids = np.asarray(TokenSplit(dataset, "val").tokens)
    notes = int(np.isin(ids, [i for t, i in tok.vocab.items() if t.split("_", 1)[0] == NOTE_TOKEN]).sum())
    return nll_token * len(ids) / notes if notes else float("nan")


def control_scores(run: Path, args, out: Path) -> dict[str, dict[str, float]]:
    """benchmarks/bench_controls.py on the run (its table written to `out`); the mean share per control, asked and
    unconditioned, read back from the table's summary."""
    cmd = [sys.executable, str(BENCHMARKS / "bench_controls.py"), str(run), "--bars", str(args.bars),
           "--num-samples", str(args.num_samples), "--device", args.device, "--seed", str(args.seed),
           "--out", str(out)] + (["--controls", args.controls] if args.controls else [])
    subprocess.run(cmd, check=True, cwd=ROOT)
    scores, heads = {}, None
    pct = lambda c: float(c.rstrip("%")) / 100 if c.endswith("%") else float("nan")  # noqa: E731
    for line in out.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| control | mean "):  # the summary: mean guarded (the default), unguarded, chance
            heads = cells
        elif heads and not line.startswith("|"):  # the summary ends (the key guard's music table follows)
            break
        elif heads and line.startswith("| ") and "%" in line:
            row = dict(zip(heads, cells))
            asked = row.get("mean guarded", row.get("mean share asked", ""))
            scores[cells[0]] = {"asked": pct(asked), "unconditioned": pct(row.get("mean unconditioned", ""))}
            if "mean unguarded" in row:
                scores[cells[0]]["unguarded"] = pct(row["mean unguarded"])
    return scores


def form_scores(run: Path, args, dataset: Path, device, meter: str | None = None) -> dict[str, float]:
    """The repeat share of the first 16 bars in riffs sampled without controls, in the meters `meter` says (the
    default `--time-signature` chosen before: "auto", else the model's own): the model alone ("samples"), and with
    each riff the form of a training tune ("form_samples", `--form auto`), as `sample` draws them."""
    loaded = load_run(run, None, str(device))
    if loaded.forms is None:  # a run from before the forms were counted: its dataset's
        loaded = replace(loaded, forms=forms_of_dataset(dataset, loaded.tokenizer))
    out: dict[str, float] = {}
    for key, form in (("samples", "none"), ("form_samples", "auto")):
        req = SampleRequest.of(outputs=Outputs(), num_samples=args.form_samples, bars=FORM_BARS, seed=args.seed,
                               device=str(device), form=form, time_signature=meter or "none")
        rep = form_report(r.gs.score for r in sample(req, loaded).riffs)
        out.update({f"{key}_repeat_share": rep.repeat_share, key: rep.pieces, f"{key}_bars": rep.bars})
    return out


def meter_scores(run: Path, args, dataset: Path, device) -> dict[str, float]:
    """Notes per second of 16-bar riffs sampled without controls and in the model's own form, in the meters the
    model opens them in ("own") and in meters drawn from the training bars ("drawn", `sample --time-signature auto`),
    beside the test tunes cut into segments as long as the riffs (evaluation/features.length_matched): the
    layout-3 models open in the dense meters more often than the tunes are in them (docs/results/TAB_TOKENS.md)."""
    loaded = load_run(run, None, str(device))
    tunes = [p for p in reference_from_split(dataset, "test", loaded.tokenizer).pieces if len(p.pitch) >= 2]
    out: dict[str, float] = {}
    for key in ("own", "drawn"):
        req = SampleRequest.of(outputs=Outputs(), num_samples=args.form_samples, bars=FORM_BARS, seed=args.seed,
                            device=str(device), form="none", time_signature="auto" if key == "drawn" else "none")
        riffs = [p for p in (piece_of(r.gs.score) for r in sample(req, loaded).riffs) if len(p.pitch) >= 2]
        ref, _ = length_matched(riffs, tunes)
        out[f"{key}_notes_per_s"] = float(np.mean([notes_per_second(p) for p in riffs])) if riffs else float("nan")
        if ref:  # segments as long as the model's own riffs: one yardstick for both
            out.setdefault("tunes_notes_per_s", float(np.mean([notes_per_second(p) for p in ref])))
    out["riffs"] = args.form_samples
    return out


def default_meter_by_measure(meter: dict) -> str | None:
    """The shipped model's default `--time-signature`: "auto" (each riff's meter drawn from the training bars) where
    those riffs' notes per second are nearer the test tunes' than the model's own meters' (as a ratio), else "none"
    (the model's own); None where a figure is missing (the run's own setting stays)."""
    own, drawn, tunes = (meter.get(f"{k}_notes_per_s") for k in ("own", "drawn", "tunes"))
    if not all(isinstance(x, float) and x > 0 for x in (own, drawn, tunes)):
        return None
    return "auto" if abs(np.log(drawn / tunes)) < abs(np.log(own / tunes)) else "none"


def default_form_by_measure(form: dict, tunes_share: float) -> str | None:
    """The shipped model's default `--form`: "none" (the model's own) or "auto" (a tune's form), whichever gives
    riffs a repeat share nearer the test tunes' (as a ratio: 0.7x and 1.43x are as far); None where a share is
    missing (then `sample` decides by the model: compose/form.py's rule in app/sample.py)."""
    alone, formed = form.get("samples_repeat_share"), form.get("form_samples_repeat_share")
    if not all(isinstance(x, float) and x > 0 for x in (alone, formed, tunes_share)):
        return None
    return "none" if abs(np.log(alone / tunes_share)) <= abs(np.log(formed / tunes_share)) else "auto"


def corpus_facts(dataset: Path, limit: int) -> dict:
    """What the prepared corpus is: its styles (tune types) and K: keys, how often the key estimate of
    vocab/controls.py agrees with the K: key on the val tunes (the ceiling of key adherence measured by that
    estimate), and the repeat share of the first 16 bars of the test tunes (their corpus MIDI, as prepared)."""
    summary = json.loads((build_corpus(limit=limit, progress=False) / "corpus.json").read_text())["labels"]
    given = corpus_labels(build_corpus(limit=limit, progress=False))
    lines = [json.loads(x) for x in (dataset / "manifest.jsonl").read_text().splitlines()]
    val = [d["path"] for d in lines if d.get("split") == "val" and given.get(str(Path(d["path"]).resolve()), {}).get("Key")]
    agree = sum(_estimated_key(symusic.Score(p)) == given[str(Path(p).resolve())]["Key"] for p in val)
    rep = form_report(symusic.Score(d["path"]) for d in lines if d.get("split") == "test")
    return {**summary, "key_estimate_agrees_val": agree / len(val) if val else float("nan"), "val_keyed": len(val),
            "test_tunes_repeat_share": rep.repeat_share, "test_tunes": rep.pieces}


def _estimated_key(score: symusic.Score) -> str | None:
    notes = [PlayedNote(n.time, n.duration, n.pitch) for t in score.tracks for n in t.notes]
    return estimate_key(notes)


def train_and_measure(kind: str, dataset: Path, args, work: Path, device) -> Scores:
    """Train one model kind on the prepared corpus (or take `--from-run`'s) and measure it (module docstring,
    steps 2-3)."""
    cfg = release_config(args.config or KINDS[kind], args)
    cfg.model.kind = kind
    cfg.data.dataset = str(dataset)
    given = args.from_run if kind == "decoder" else args.encdec_run
    trained_on = str(device)
    if given is not None:
        run, summary = given, trained_by_recipe(given, args.limit, kind)
        seconds, trained_on = float(summary["seconds"]), str(summary.get("device", "an unrecorded device"))
    else:
        run = work / kind
        t0 = time.time()
        summary = train(cfg, run_dir=run, progress=not args.quiet, force=True)
        seconds = time.time() - t0
    nll = float(summary["best_val_loss"])
    per_note = summary.get("val_nats_per_note")  # the last evaluation's, on the plain stream
    if per_note is not None and summary.get("val_loss"):  # the best checkpoint's: the val split's notes per token
        per_note = float(per_note) * nll / float(summary["val_loss"])
    scores = Scores(kind, cfg.name, str(run), int(summary["step"]), round(seconds, 1), trained_on, nll,
                    float(per_note) if per_note is not None else val_nll_per_note(dataset, nll))
    scores.controls = control_scores(run, args, work / f"CONTROLS-{kind}.md")
    bench = _script("bench_infill")
    scores.infill = bench.bench_run(run, args.num_infill, args.seed, device)
    if kind == "decoder":  # the default meter first: the forms' repeats are counted in the meters riffs will have
        scores.meter = meter_scores(run, args, dataset, device)
    scores.form = form_scores(run, args, dataset, device, default_meter_by_measure(scores.meter))
    return scores


def trained_by_recipe(run: Path, limit: int, kind: str = "decoder") -> dict:
    """The summary of a `kind` run trained on the built-in corpus (its first `limit` files; 0: all) with controls
    and infilling (the release recipe: `guitarformer train`'s defaults), for --from-run / --encdec-run; anything
    else is refused."""
    flag = "--from-run" if kind == "decoder" else "--encdec-run"
    summary_file, cfg_file = run / "summary.json", run / "config.yaml"
    if not summary_file.is_file() or not cfg_file.is_file():
        sys.exit(f"{flag} {run}: not a finished run (no summary.json or config.yaml)")
    cfg = load_config(str(cfg_file))
    if cfg.model.kind != kind or not cfg.data.controls or cfg.data.infill <= 0 or cfg.data.corpus_limit != limit:
        sys.exit(f"{flag} {run}: not the release recipe (a {kind} on the built-in corpus with controls and "
                 f"infilling{f', its first {limit} files' if limit else ''})")
    return json.loads(summary_file.read_text())


def run_seed(args) -> int:
    """The seed the shipped decoder trained with: --seed, or the --from-run run's own."""
    return load_config(str(args.from_run / "config.yaml")).train.seed if args.from_run else args.seed


def from_run_recipe(run: Path) -> str:
    """The card's sentence on how a --from-run run was trained: the quickstart (`guitarformer train` with its
    defaults) or the command with the budget and schedule it had."""
    loaded, default = read_run(run), load_config(KINDS["decoder"])
    cfg = loaded.cfg
    budget, cap = cfg.train.time_budget_min, cfg.train.max_steps
    if budget == default.train.time_budget_min and cfg.train.seed == default.train.seed:
        how = "with its defaults (the quickstart"
    else:
        how = (f"with a {budget:g}-minute budget (`--set train.time_budget_min={budget:g}` and a `--max-steps` "
               f"above what fits: the schedule fitted to {cap} steps on the machine"
               if loaded.state.budget_fitted else f"for {cap} steps (`--max-steps {cap}`")
    changed = _changed_settings(cfg, default)
    return f"The run was trained by `guitarformer train` {how}; run {run.name})" + (
        f" with {', '.join(f'`--set {c}`' for c in changed)}" if changed else "") + \
        ", then measured and exported by the command above."


# Settings of a run's config that say nothing about its recipe: where its data sat, its schedule's bookkeeping (said
# apart: the budget and steps), how often it logged, evaluated and sampled, the seed (said apart).
_NOT_RECIPE = {"data.dataset", "train.max_steps", "train.time_budget_min", "train.eval_interval",
               "train.log_interval", "train.sample_interval", "train.seed", "train.device", "train.init",
               "model.vocab_size", "name"}


def _changed_settings(cfg: Config, default: Config) -> list[str]:
    """`section.key=value` for each setting of a run's `cfg` that differs from the preset `default`'s: what the card
    must say beside `guitarformer train` for the run to be trained again."""
    out = []
    for section in ("data", "model", "train"):
        mine, base = asdict(getattr(cfg, section)), asdict(getattr(default, section))
        out += [f"{section}.{k}={v}" for k, v in mine.items()
                if v != base.get(k) and f"{section}.{k}" not in _NOT_RECIPE]
    return out


def tokens_sentence(run: Path) -> str:
    """How the shipped run writes a note, how often its training windows left every control out, and whether its
    loss scored the control tokens."""
    cfg = load_run(run).cfg  # its saved config, the tab layout as its tokenizer says
    layout = cfg.data.tab_layout
    how = ("a String only where a note leaves its lowest-fret string" if layout == 3 else "a String on every note")
    plain = f"; {_pct(cfg.data.control_plain)} of its training windows without any control" \
        if cfg.data.control_plain else ""
    read = "; its control tokens read, not scored by the loss" if cfg.data.controls and not cfg.data.control_targets \
        else ""
    return f"tab layout {layout}: {how}{plain}{read}"


def _meter_sentence(scores: dict, meter: str | None) -> str:
    """The card's words on the default `--time-signature`, from `meter_scores`."""
    if not scores:
        return ""
    nps = lambda k: scores.get(f"{k}_notes_per_s", float("nan"))  # noqa: E731
    return (f" Its riffs ({scores.get('riffs', 0)}, 16 bars, the model's own form) play {nps('own'):.2f} notes a "
            f"second in the meters it opens them in and {nps('drawn'):.2f} in meters drawn from the training bars "
            f"(`--time-signature auto`), the test tunes {nps('tunes'):.2f}; `sample`'s default: "
            + {"auto": "drawn (config.yaml sample.time_signature: auto).", "none": "the model's own."}.get(
                meter, "the run's own setting (a figure is missing)."))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x == x else "n/a"


def write_credits(out: Path) -> int:
    """The training data's credits beside the shipped model: CREDITS.md (every classical piece, Freedoom, the fiddle
    tunes) and Freedoom's licence and composers' credits as they come; returns the bytes written."""
    pieces = classical_credits()
    lines = ["# What the shipped model learned from", "",
             f"- Fiddle tunes: the {', '.join(COLLECTIONS)} collections shipped inside music21 (public domain).",
             "- Freedoom (https://freedoom.github.io), its level music's guitar parts: Copyright the Freedoom "
             "contributors, BSD-3-Clause (freedoom-COPYING.adoc); composers in freedoom-CREDITS-MUSIC.",
             f"- The Mutopia Project (https://www.mutopiaproject.org): {len(pieces)} classical guitar pieces, each "
             "under the licence named below (CC-BY: Creative Commons Attribution; PD: public domain).", "",
             "| composer | title | Mutopia id | licence |", "|---|---|---|---|"]
    lines += [f"| {r['composer']} | {r['title']} | {r['mutopia_id']} | {r['license']} |" for r in pieces]
    out.mkdir(parents=True, exist_ok=True)
    (out / "CREDITS.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name in ("COPYING.adoc", "CREDITS-MUSIC"):
        shutil.copyfile(FREEDOOM / name, out / f"freedoom-{name}")
    return sum((out / f).stat().st_size for f in ("CREDITS.md", "freedoom-COPYING.adoc", "freedoom-CREDITS-MUSIC"))


def model_card(shipped: Scores, others: list[Scores], meta: dict, corpus: dict, args, form: str | None = None,
               meter: str | None = None) -> str:
    """MODEL_CARD.md from the measured numbers."""
    lines = [
        "# guitarformer's shipped model", "",
        f"A {shipped.kind} ({shipped.config} recipe) over tab tokens ({tokens_sentence(Path(shipped.run))}) with "
        "controls and bar infilling; `guitarformer sample` and `guitarformer infill` use it when no run is named and "
        "none has been trained.", "",
        "## Data", "",
        f"The built-in corpus ({CORPUS_VERSION}), every piece under a licence that lets a shipped model learn from "
        f"it: the fiddle-tune collections {', '.join(COLLECTIONS)} that ship inside music21 (public domain; read as "
        "ABC, an octave below written pitch); the Mutopia Project's classical guitar pieces marked public domain or "
        "CC-BY (rendered from LilyPond by tools/render_mutopia.py; each piece's composer, title, Mutopia id and "
        "licence in CREDITS.md beside this card; the CC-BY-SA pieces are not in the training data: they are the "
        "classical test set); Freedoom's level music, its guitar parts (BSD-3-Clause: freedoom-COPYING.adoc and "
        "freedoom-CREDITS-MUSIC beside this card), muted-guitar tracks read as palm mutes, parts below E2 in the "
        "drop tuning that plays them. Notes without a fingering fretted by `fret()`. "
        f"{meta['files']} files; {meta['tokens']['train']:,} train / {meta['tokens']['val']:,} val / "
        f"{meta['tokens']['test']:,} test tokens; vocabulary {meta['vocab_size']}. Styles: "
        f"{', '.join(meta.get('control_styles') or []) or 'none'} (rock: Freedoom; classical: Mutopia; the others "
        "the fiddle tunes' types from R: or the title). Keys: "
        + ("the tunes' K: fields (mode kept by its third: dorian is minor, mixolydian major), estimated from the "
           "notes for the guitar pieces." if labels_taken()
           else "estimated from the notes (this version's prepare takes no written keys)."), "",
        "## Recipe", "",
        f"    {args.command}", "",
        f"Config {shipped.config} with {', '.join(RECIPE + list(args.set))}; {shipped.steps} steps in "
        f"{shipped.train_seconds / 60:.1f} min on {shipped.device}; seed {run_seed(args)}."
        + (" " + from_run_recipe(args.from_run) if args.from_run else ""), "",
        "## Scores", "",
        "Filled bars are sampled as `guitarformer infill` samples them: of "
        f"{shipped.infill.get('candidates', 1)} fills drawn side by side (`--candidates`), the one that best fits the "
        "bars around the gap, the model's likelihood breaking near-ties; OA copy-left: the bars "
        "before the gap copied in its place (docs/results/INFILL.md).", "",
        "| model | val NLL / token | val NLL / note | infill NLL both sides | left only | ratio | "
        "OA fill pitch/duration/onset | OA copy-left | riffs repeating (16 bars) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in [shipped, *others]:
        i = s.infill
        ratio = i["nll_both"] / i["nll_left"] if i.get("nll_left") else float("nan")
        oa = "/".join(f"{i['oa'][n]:.3f}" for n in ("pitch", "duration", "onset")) if i else "n/a"
        oa_left = "/".join(f"{i['oa_left'][n]:.3f}" for n in ("pitch", "duration", "onset")) if i else "n/a"
        lines.append(f"| {s.kind}{' (shipped)' if s is shipped else ''} | {s.val_nll_token:.3f} | "
                     f"{s.val_nll_note:.3f} | {i.get('nll_both', float('nan')):.3f} | "
                     f"{i.get('nll_left', float('nan')):.3f} | {ratio:.3f} | {oa} | {oa_left} | "
                     f"{_pct(s.form.get('samples_repeat_share', float('nan')))} alone, "
                     f"{_pct(s.form.get('form_samples_repeat_share', float('nan')))} with a tune's form "
                     f"({s.form.get('samples', 0)} riffs) |")
    lines += ["", f"The corpus: {corpus['tunes']} tunes, styles {json.dumps(corpus['styles'])}; {corpus['key_labels']} "
              f"with a K: key (modes {json.dumps(corpus['modes'])}). The key estimate the adherence table uses agrees "
              f"with K: on {_pct(corpus['key_estimate_agrees_val'])} of {corpus['val_keyed']} val tunes (key's ceiling). "
              f"The test tunes repeat {_pct(corpus['test_tunes_repeat_share'])} of their first 16 bars "
              f"({corpus['test_tunes']} tunes)."
              + (f" `sample`'s default form for this model: `{form}` ("
                 + ("the model's own" if form == "none" else "each riff a training tune's form")
                 + ", the one whose repeat share is nearer the test tunes' as a ratio; config.yaml sample.form)."
                 if form else "") + _meter_sentence(shipped.meter, meter), "",
              "Control adherence (share of riffs or bars that have the asked value, measured from the notes; "
              f"{args.num_samples} riffs of at most {args.bars} bars per value; benchmarks/bench_controls.py):", "",
              "| model | control | asked (guarded: the default) | asked, --no-guard | unconditioned |",
              "|---|---|---|---|---|"]
    for s in [shipped, *others]:
        for name, c in s.controls.items():
            lines.append(f"| {s.kind} | {name} | {_pct(c['asked'])} | {_pct(c.get('unguarded', float('nan')))} | "
                         f"{_pct(c['unconditioned'])} |")
    return "\n".join(lines) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=15.0, help="training time per model kind")
    ap.add_argument("--max-steps", type=int, default=20000, help="the schedule's length before --minutes fits it")
    ap.add_argument("--steps", type=int, default=0, help="exactly this many steps instead of --minutes")
    ap.add_argument("--config", default=None, help="config for every kind (default: decoder-small, encdec-small)")
    ap.add_argument("--set", action="append", default=[], help="section.key=value beside the recipe")
    ap.add_argument("--limit", type=int, default=0, help="first N source files of the corpus (0: all)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encdec", action="store_true", help="also train and measure the encoder-decoder")
    ap.add_argument("--bars", type=int, default=4, help="bars per riff in the control benchmark")
    ap.add_argument("--num-samples", type=int, default=16, help="riffs per control value")
    ap.add_argument("--controls", default="", help="bench_controls.py --controls (default: all)")
    ap.add_argument("--num-infill", type=int, default=200, help="spans in the infilling benchmark")
    ap.add_argument("--form-samples", type=int, default=60, help="unconditioned riffs for the repeat share")
    ap.add_argument("--work", type=Path, default=None, help="folder for runs and tables (default runs/release-*)")
    ap.add_argument("--out", type=Path, default=pretrained_dir(), help="where the shipped model goes")
    ap.add_argument("--docs", action="store_true", help="write docs/results/CONTROLS.md and docs/results/INFILL.md from this release")
    ap.add_argument("--from-run", type=Path, default=None, help="release this decoder run, already trained by the "
                    "recipe (e.g. the quickstart's `guitarformer train`), instead of training one")
    ap.add_argument("--encdec-run", type=Path, default=None, help="with --encdec: measure this encoder-decoder run "
                    "(`guitarformer train --config encdec-small --set data.controls=true --set data.infill=0.3`) "
                    "instead of training one")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    args.command = "python tools/release_model.py " + " ".join(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    work = args.work or ROOT / "runs" / time.strftime("release-%Y%m%d-%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    dataset = ensure_builtin_dataset(release_config(args.config or KINDS["decoder"], args).data,
                                     progress=not args.quiet)
    meta = load_meta(dataset)
    print(f"dataset {dataset}: {meta['tokens']['train']:,} train tokens, styles {meta.get('control_styles')}")
    kinds = ["decoder", "encoder_decoder"] if args.encdec else ["decoder"]
    scores = [train_and_measure(kind, dataset, args, work, device) for kind in kinds]
    corpus = corpus_facts(dataset, args.limit)
    form = default_form_by_measure(scores[0].form, corpus["test_tunes_repeat_share"])
    meter = default_meter_by_measure(scores[0].meter)
    card = model_card(scores[0], scores[1:], meta, corpus, args, form, meter)
    exported = export_run(Path(scores[0].run), card, args.out, form, meter)
    exported = replace(exported, bytes=exported.bytes + write_credits(exported.folder))
    # What the shipped model learned, per control (vocab/seen.py): `sample` refuses what its data never held.
    seen = read_seen(dataset) or count_dataset(dataset, load_tokenizer(dataset / "tokenizer.json").vocab)
    exported = replace(exported, bytes=exported.bytes + write_seen(exported.folder, seen).stat().st_size)
    # The forms of its training tunes (compose/form.py): what `sample --form auto` draws.
    forms = forms_of_dataset(dataset, load_tokenizer(dataset / "tokenizer.json"))
    if forms is not None:
        exported = replace(exported, bytes=exported.bytes + write_forms(exported.folder, forms).stat().st_size)
    report = {"dataset": str(dataset), "corpus": corpus, "scores": [asdict(s) for s in scores],
              "exported": {**asdict(exported), "folder": str(exported.folder)}, "torch": torch.__version__}
    (work / "release.json").write_text(json.dumps(report, indent=2, default=str))
    if args.docs:
        (ROOT / "docs" / "results" / "CONTROLS.md").write_text((work / "CONTROLS-decoder.md").read_text())
        _script("bench_infill").write_doc([s.infill for s in scores], ROOT / "docs" / "results" / "INFILL.md",
                                          args.command)
    print(f"exported {exported.folder}: {exported.parameters:,} parameters as {exported.dtype}, "
          f"{exported.bytes / 2**20:.2f} MiB; numbers in {work / 'release.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
