"""The `guitarformer eval` command: likelihood, n-gram floor, sample features, playability; table and TensorBoard."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from torch.utils.tensorboard import SummaryWriter

from guitarformer.data.corpus import ensure_builtin_dataset
from guitarformer.data.dataset import PLAIN, PairLayout, Seq2SeqPairs, TokenSplit
from guitarformer.data.prepare import load_meta
from guitarformer.vocab.tokenization import decode
from guitarformer.errors import GuitarformerError
from guitarformer.evaluation.features import Piece, compare, length_matched, piece_of
from guitarformer.evaluation.form import FORM_BARS, form_report
from guitarformer.evaluation.likelihood import continuation_nll, ngram_continuation, plain_tokens, stream_nll
from guitarformer.evaluation.ngram import KneserNey
from guitarformer.evaluation.playability import fingering_agreement, playability
from guitarformer.evaluation.reference import reference_from_dir, reference_from_split
from guitarformer.compose.riffs import Draws, generate_riffs
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.models.kinds import kind_of
from guitarformer.runs import RunDir, checkpoint_of, load_run, newest_run
from guitarformer.runtime import resolve_device, set_threads, step_work


@dataclass(frozen=True)
class EvalOptions:
    """What evaluate_run measures, and where. `split`: the dataset split scored (and, without `reference`, the
    music sampled against). `threads`: CPU threads (0: runtime.set_threads picks them for the likelihood's batches;
    sampling picks its own). `cont_src`/`cont_tgt`: continuation lengths (None: the run's). `samples`: sample
    `num_samples` riffs of up to `max_new_tokens` tokens (None: the run's) from `seed` on and compare them with
    `reference` (a folder of real files; None: the split, decoded)."""

    split: str = "test"
    device: str = "auto"
    threads: int = 0
    ngram_order: int = 5
    cont_src: int | None = None
    cont_tgt: int | None = None
    samples: bool = True
    num_samples: int = 32
    max_new_tokens: int | None = None
    reference: Path | None = None
    seed: int = 0


def evaluate_run(run_dir: Path | None, data: Path | None = None, options: EvalOptions = EvalOptions(),
                 progress: Callable[[str], Any] | None = None) -> dict:
    """Everything `guitarformer eval` reports for a run, as a nested dict (see docs/results/EVAL.md), measured as
    `options` say."""
    say = progress or (lambda s: None)
    split, ngram_order = options.split, options.ngram_order
    dev = resolve_device(options.device)
    ck = checkpoint_of(Path(run_dir) if run_dir else newest_run())  # `pretrained`: the shipped model's file
    loaded = load_run(None, ck, str(dev))
    run_dir = loaded.run_dir
    model, tokenizer, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    if dev.type == "cpu":
        set_threads(options.threads, step_work(model, cfg.train.batch_size * cfg.model.block_size))
    if data or cfg.data.dataset:
        dataset = Path(data or cfg.data.dataset).expanduser()
    else:  # trained on the built-in corpus (the shipped model too): that corpus, prepared with the run's settings
        say("the built-in corpus, prepared with the run's tokenizer (built on first use)")
        dataset = ensure_builtin_dataset(cfg.data, progress=progress is not None)
    meta = load_meta(dataset)
    if meta["tokens"].get(split, 0) < 2:
        held = [s for s in ("val", "test") if s != split and meta["tokens"].get(s, 0) >= 2]
        raise GuitarformerError(
            f"the {split} split of {dataset} is empty: its {meta['files']} files are too few for every split "
            f"(val and test each hold about 1 file in 20, chosen by content hash)",
            (f"evaluate with --split {held[0]}, or " if held else "") + "prepare a dataset with more files")
    if len(tokenizer) != cfg.model.vocab_size:
        raise GuitarformerError(f"the run's vocabulary ({cfg.model.vocab_size}) does not match {dataset}'s tokenizer",
                                "evaluate on the dataset the run was trained on (--data)")
    kind, m = cfg.model.kind, cfg.model
    # The evaluated checkpoint's step (best.pt is often an earlier step than the run's last); summary.json's where a
    # checkpoint has none recorded.
    step = loaded.step
    summ = loaded.dir.summary_path
    if step is None:
        step = json.loads(summ.read_text()).get("step", 0) if summ.is_file() else 0
    res: dict[str, Any] = {"run": str(run_dir), "kind": kind, "dataset": str(dataset), "split": split, "step": step}
    part = TokenSplit(dataset, split)
    bs = cfg.train.batch_size
    V = len(tokenizer)

    # Continuation lengths: what the encoder-decoder was trained on; a decoder fits source + target in its context.
    api = kind_of(model)
    S, T = api.continuation_lengths(m, options.cont_src, options.cont_tgt)
    # the plain stream, as training validates: no control tokens
    pairs = Seq2SeqPairs(part, PairLayout.of(tokenizer, S, T), control_dropout=PLAIN)

    t0 = time.time()
    say(f"likelihood on {split} ({len(part):,} tokens)")
    # A model that reads one token stream is scored on the whole split, as training validates; one that reads
    # source/target pairs on the continuation pairs alone.
    res["likelihood"] = {"scope": "stream", **stream_nll(model, part, m.block_size, dev, bs)} if api.streams \
        else None
    res["continuation"] = {"src_len": S, "tgt_len": T, "pairs": len(range(0, len(pairs.cut_points), 8)),
                           "model": continuation_nll(model, pairs, dev, bs)}
    res["likelihood"] = res["likelihood"] or {"scope": "continuation", **res["continuation"]["model"]}
    say(f"{ngram_order}-gram Kneser-Ney baseline")
    train = TokenSplit(dataset, "train")
    # Fitted and scored on the plain stream too, so the floor reads the tokens the model is scored on.
    lm = KneserNey(V, ngram_order).fit([plain_tokens(train, tokenizer).tolist()])
    res["ngram"] = {"order": ngram_order, **lm.score(plain_tokens(part, tokenizer), accuracy=True)}
    res["continuation"]["ngram"] = ngram_continuation(lm, pairs)
    res["seconds_likelihood"] = round(time.time() - t0, 1)

    if options.samples:
        res.update(_sample_metrics(model, tokenizer, cfg, dev, dataset, options, say))
    return res


def _sample_metrics(model, tokenizer, cfg, dev, dataset, options: EvalOptions, say):
    split, reference, num_samples, seed = options.split, options.reference, options.num_samples, options.seed
    max_new_tokens = options.max_new_tokens or cfg.sample.max_new_tokens
    t0 = time.time()
    say(f"sampling {num_samples} riffs of up to {max_new_tokens} tokens")
    s = cfg.sample
    scores = []
    for b in range(0, num_samples, 16):
        params = SamplingParams(max_new_tokens, s.temperature, s.top_k or None, s.top_p)
        riffs = generate_riffs(model, tokenizer, cfg, params, Draws(min(16, num_samples - b), seed + b), device=dev)
        # Score what the model wrote (the sampler's own octave repair is left out: it would hide unplayable notes).
        scores += [decode(tokenizer, r.ids) for r in riffs]
    gen: list[Piece] = [p for p in map(piece_of, scores) if len(p.pitch) >= 2]
    if reference:
        say(f"reading the reference set {reference}")
        real = reference_from_dir(Path(reference))
        ref_name = str(reference)
    else:
        real = reference_from_split(dataset, split, tokenizer)
        ref_name = f"{dataset} ({split} split, decoded)"
    ref_full = [p for p in real.pieces if len(p.pitch) >= 2]
    if len(ref_full) < 2:
        raise GuitarformerError(f"the reference set {ref_name} has fewer than 2 pieces with notes",
                                "pass --reference DIR with real guitar files, or --no-samples")
    # Length-matched: reference pieces are cut into segments as long as the median sample (in whole bars).
    ref, seg = length_matched(gen, ref_full)
    say(f"music metrics: {len(gen)} samples vs {len(ref)} reference segments of {seg:g} quarters")
    out = {"music": {"reference": ref_name, "num_samples": len(gen), "num_reference": len(ref),
                     "reference_files_skipped": real.skipped, "segment_quarters": seg,
                     "metrics": compare(gen, ref, seed) if gen else {}},
           "playability": {"samples": playability(gen), "reference": playability(ref),
                           "fingering": fingering_agreement(ref_full)},
           "form": form_comparison(scores, real.scores)}
    out["seconds_samples"] = round(time.time() - t0, 1)
    return out


def form_comparison(samples, reference) -> dict[str, Any]:
    """The share of the first FORM_BARS bars that repeat an earlier bar exactly (evaluation/form.py), on the
    samples and on the reference pieces whole, and their ratio (1 = as repetitive as the real music)."""
    s, r = form_report(samples), form_report(reference)
    return {"bars": FORM_BARS, "samples": asdict(s), "reference": asdict(r),
            "ratio": s.repeat_share / r.repeat_share if r.repeat_share else math.nan}


# ---------------------------------------------------------------- reporting


def scalars(res: dict) -> dict[str, float]:
    """The numeric leaves of a result, flattened to 'likelihood/nll'-style names (NaN and counts of inputs kept)."""
    out: dict[str, float] = {}

    def walk(d, prefix):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}/")
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                out[prefix + k] = float(v)

    walk(res, "")
    return out


def jsonable(res: Any) -> Any:
    """The result with NaN/inf as null, so --json writes strict JSON."""
    if isinstance(res, dict):
        return {k: jsonable(v) for k, v in res.items()}
    if isinstance(res, float) and not math.isfinite(res):
        return None
    return res


def log_tensorboard(run_dir: Path, res: dict) -> bool:
    """The report in the run's TensorBoard, at the run's step: one table under Text (eval/<split>), so the Scalars
    page keeps the run's own curves first instead of a card per one-point number. The shipped model is not logged:
    its folder is part of the installed package. Returns whether it logged."""

    if RunDir(run_dir).is_shipped:
        return False
    rows = [f"| {k} | {v:.4g} |" for k, v in scalars(res).items() if math.isfinite(v)]
    w = SummaryWriter(str(RunDir(run_dir).tb_dir))
    w.add_text(f"eval/{res['split']}", "\n".join(["| measure | value |", "| --- | --- |", *rows]), res.get("step", 0))
    w.close()
    return True


def _f(v: Any, nd: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def format_table(res: dict) -> str:
    """A terminal report of an evaluate_run result."""
    L = [f"run {res['run']} ({res['kind']}, step {res['step']}) on {res['dataset']} [{res['split']}]", ""]
    L.append(f"{'likelihood':<34}{'nll/tok':>9}{'ppl':>9}{'acc':>8}{'tokens':>9}")
    lk, ng, co = res["likelihood"], res["ngram"], res["continuation"]
    if lk["scope"] == "stream":
        L.append(f"{'  model (token stream)':<34}{_f(lk['nll']):>9}{_f(lk['ppl'], 2):>9}{_f(lk['accuracy']):>8}{lk['tokens']:>9}")
    L.append(f"{'  ' + str(ng['order']) + '-gram KN (token stream)':<34}{_f(ng['nll']):>9}{_f(ng['ppl'], 2):>9}"
             f"{_f(ng['accuracy']):>8}{ng['tokens']:>9}")
    tag = f"continuation {co['src_len']}->{co['tgt_len']}"
    for name, r in (("model", co["model"]), (f"{ng['order']}-gram KN", co["ngram"])):
        L.append(f"{'  ' + name + ' (' + tag + ')':<34}{_f(r['nll']):>9}{_f(r['ppl'], 2):>9}{_f(r['accuracy']):>8}"
                 f"{r['tokens']:>9}")
    if "music" in res:
        mu = res["music"]
        L += ["", f"music: {mu['num_samples']} samples vs {mu['num_reference']} reference segments of "
                  f"{mu['segment_quarters']:g} quarters ({mu['reference']})",
              f"{'metric':<24}{'samples':>16}{'reference':>16}{'OA':>7}{'ceiling':>9}"]
        for k, v in mu["metrics"].items():
            L.append(f"  {k:<22}{_f(v['samples_mean'], 2) + ' ± ' + _f(v['samples_std'], 2):>16}"
                     f"{_f(v['reference_mean'], 2) + ' ± ' + _f(v['reference_std'], 2):>16}{_f(v['oa'], 2):>7}"
                     f"{_f(v['oa_ceiling'], 2):>9}")
        pl = res["playability"]
        L += ["", f"{'playability':<24}{'samples':>10}{'reference':>11}"]
        for k in ("fretable", "chord_stretch_ok", "shifts_per_bar"):
            L.append(f"  {k:<22}{_f(pl['samples'][k]):>10}{_f(pl['reference'][k]):>11}")
        fg = pl["fingering"]
        L.append(f"  {'fingering vs human tab':<22}{'':>10}{_f(fg['agreement']):>11}  ({fg['notes']} notes, "
                 f"{fg['pieces']} pieces with frets)")
        fo = res["form"]
        L += ["", f"{'form (first ' + str(fo['bars']) + ' bars)':<24}{'samples':>10}{'reference':>11}{'ratio':>8}",
              f"  {'bars repeating exactly':<22}{_f(fo['samples']['repeat_share']):>10}"
              f"{_f(fo['reference']['repeat_share']):>11}{_f(fo['ratio'], 2):>8}  ({fo['samples']['pieces']} and "
              f"{fo['reference']['pieces']} pieces, {fo['samples']['bars']} and {fo['reference']['bars']} bars)"]
    return "\n".join(L)
