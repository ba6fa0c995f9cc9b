"""Command line: thin click commands that parse, load the config and call one function (heavy imports are lazy)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from guitarformer.cli_options import ControlOptions
from guitarformer.errors import GuitarformerError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _Group(click.Group):
    """Turns user errors into one clear line and a non-zero exit; tracebacks only with --debug."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GuitarformerError as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"error: {e.problem}", err=True)
            if e.fix:
                click.echo(f"  fix: {e.fix}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


@click.group(cls=_Group, context_settings=CONTEXT)
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(package_name="guitarformer")
@click.pass_context
def main(ctx, debug):
    """guitarformer: guitar music generation with Transformers.

    \b
      guitarformer prepare ~/my-tabs --out data/prepared/mine   # tokenize a folder
      guitarformer train                                        # built-in corpus, default decoder
      tensorboard --logdir runs                                 # watch it
      guitarformer sample --out riff.mid --tab riff.txt         # newest run: MIDI + tab
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _progress() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")


def _dataset(ctx, param, value: Path | None) -> Path | None:
    """A dataset folder, or the bare name of one that is not a folder here: a dataset `prepare` wrote under
    data/prepared (its default --out) or into the cache (the built-in corpus's, e.g. builtin-tabremi-...)."""
    if value is None or value.exists() or len(value.parts) != 1:
        return value
    from guitarformer.data.corpus import default_dataset_dir

    for home in (Path("data") / "prepared", default_dataset_dir().parent):
        if (home / value).is_dir():
            return (home / value).resolve()
    return value


_threads = click.option("--threads", type=click.IntRange(0), default=0, show_default=True,
                        help="CPU threads (0: chosen for the work: one for small steps, the idle cores for big ones; "
                        "OMP_NUM_THREADS when set).")
_compile = click.option("--compile", "compile_step", is_flag=True,
                        help="Compile the one-token decoding step (torch.compile; needs a C++ compiler on a CPU). "
                        "Seconds of compiling first (saved for later processes), then a quicker step on a CPU where "
                        "riffs are drawn one at a time (--batch-size 1; guided ones too): for many or long riffs, and "
                        "the studio. On a GPU the compiled step is what its CUDA graph replays.")

# ---------------------------------------------------------------- prepare / info


@main.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="Dataset folder (default: data/prepared/<name>; "
              "no INPUTS: the built-in corpus in the cache).")
@click.option("--config", "config_name", default=None, help="Config name or YAML file (its data section is used).")
@click.option("--tokenizer", type=click.Choice(["TabREMI", "REMI", "TSD", "MIDILike", "Structured"]), default=None,
              help="TabREMI: REMI whose notes carry string and techniques. Default: the config's.")
@click.option("--force", is_flag=True, help="Replace a dataset in --out that was prepared with other token settings.")
@click.option("--bpe", "bpe_vocab", type=click.IntRange(0), default=None,
              help="Train miditok BPE to this vocabulary size (0 = base tokens).")
@click.option("--tracks", type=click.Choice(["guitar", "all"]), default="guitar", show_default=True,
              help="MIDI: keep guitar tracks (programs 24-31) or every non-drum track.")
@click.option("--include-bass", is_flag=True, help="Keep bass tracks too.")
@click.option("--workers", type=click.IntRange(0, 1024), default=0, show_default=True,
              help="Processes (0 = all cores).")
@click.option("--set", "overrides", multiple=True, help="Config override, e.g. --set data.num_velocities=8")
@click.option("--like", "like", default=None, metavar="RUN",
              help="Tokenize as this run did (`pretrained`: the shipped model; a run directory or checkpoint), new "
              "styles added to its vocabulary: a dataset to fine-tune it on with `train --init RUN`.")
def prepare(inputs, out, config_name, tokenizer, force, bpe_vocab, tracks, include_bass, workers, overrides, like):
    """Tokenize files and folders (MIDI, Guitar Pro, ASCII tab, MusicXML, ABC) into a dataset folder.

    With no INPUTS the built-in corpus (Freedoom's rock guitar parts, Mutopia's classical guitar pieces and the
    fiddle tunes shipped with music21) is prepared into the cache.
    Every input file gets a line in manifest.jsonl saying what happened to it.
    """
    from guitarformer.config import load_config, set_values
    from guitarformer.data.prepare import prepare as run_prepare
    from guitarformer.data.prepare import summary_lines

    cfg = load_config(config_name, list(overrides))
    cfg = set_values(cfg, {k: v for k, v in (("data.tokenizer", tokenizer), ("data.bpe_vocab_size", bpe_vocab))
                           if v is not None})
    like_tok = None
    if like is not None:
        if config_name or tokenizer or bpe_vocab is not None or overrides or not inputs:
            raise GuitarformerError("--like takes every token setting from the run it names",
                                    "pass your files and --like RUN without --config, --tokenizer, --bpe or --set")
        from guitarformer.training.init import load_init

        init = load_init(like)
        cfg.data, like_tok = init.cfg.data, init.tokenizer
        cfg.data.dataset = None
    if not inputs:
        from guitarformer.data.corpus import ensure_builtin_dataset

        path = ensure_builtin_dataset(cfg.data, out=out, progress=_progress())
        from guitarformer.data.prepare import load_meta

        meta = load_meta(path)
    else:
        if out is None:
            from guitarformer.data.prepare import suggested_out

            out = suggested_out(inputs[0])
        meta = run_prepare(list(inputs), out, cfg.data, tracks=tracks, include_bass=include_bass, workers=workers,
                           progress=_progress(), force=force, like=like_tok)
        path = out
    for line in summary_lines(meta):
        click.echo(line)
    if meta["status"].get("ok", 0) == 0:
        from guitarformer.data.prepare import readable_types

        raise GuitarformerError(f"none of the {meta['files']} input files gave usable guitar music "
                                f"(reasons in {path / 'manifest.jsonl'})",
                                f"pass files with a guitar part: {readable_types()}")
    init_flag = f" --init {like}" if like is not None else ""
    click.echo(f"wrote {path}  (next: guitarformer train --data {path}{init_flag})")


@main.command(context_settings=CONTEXT)
@click.argument("dataset", type=click.Path(path_type=Path), required=False, callback=_dataset)
def info(dataset):
    """Summarise a prepared dataset (files, tokens, vocab, counts by format and status) or a run directory."""
    import json

    from guitarformer.data.prepare import load_meta, summary_lines
    from guitarformer.runs import RunDir

    if dataset is None:
        from guitarformer.data.corpus import default_dataset_dir

        cands = sorted(default_dataset_dir().parent.glob("builtin-*"))
        if not cands:
            raise GuitarformerError("no dataset given and the built-in corpus is not prepared yet",
                                    "pass a dataset folder, or run `guitarformer prepare`")
        dataset = max(cands, key=lambda d: d.stat().st_mtime)  # the most recently prepared
    run = RunDir(dataset)
    if run.is_run():
        summ = run.summary_path
        click.echo(run.config_path.read_text())
        if summ.is_file():
            click.echo(json.dumps(json.loads(summ.read_text()), indent=2))
        return
    for line in summary_lines(load_meta(dataset)):
        click.echo(line)


# ---------------------------------------------------------------- train


@main.command(context_settings=CONTEXT)
@click.option("--config", "config_name", default=None, help="Config name (configs/NAME.yaml) or YAML file; "
              "default decoder-small.")
@click.option("--model", "model_kind", type=click.Choice(["decoder", "encoder-decoder"]), default=None,
              help="Model family (default: the config's; encoder-decoder alone picks encdec-small).")
@click.option("--data", type=click.Path(path_type=Path), default=None, callback=_dataset,
              help="Prepared dataset folder, or its name (default: the built-in corpus, prepared on first use).")
@click.option("--run-dir", type=click.Path(path_type=Path), default=None,
              help="Default: runs/<timestamp>. A folder that already holds a run needs --resume or --force.")
@click.option("--force", is_flag=True, help="Start afresh in a --run-dir that holds a run (deletes its checkpoints "
              "and logs).")
@click.option("--max-steps", type=click.IntRange(1), default=None,
              help="Optimizer steps (default: the config's train.max_steps; with --resume: train on to this step).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default=None,
              help="Default: the config's train.device (auto: a GPU where there is one).")
@click.option("--resume", type=click.Path(path_type=Path), default=None, help="Continue a run exactly.")
@click.option("--init", "init", default=None, metavar="RUN",
              help="Fine-tune: start from this run's weights and architecture (`pretrained`: the shipped model; a "
              "run directory or checkpoint) with a fresh optimizer and schedule. --data must be prepared "
              "--like RUN. Without --config, the fine-tune recipe's learning rate and step count (docs/training.md) "
              "where --set and --max-steps give none.")
@click.option("--set", "overrides", multiple=True, help="Config override section.key=value (repeatable).")
@_threads
def train(config_name, model_kind, data, run_dir, force, max_steps, device, resume, overrides, threads, init):
    """Train a decoder or encoder-decoder; checkpoints and TensorBoard logs go to the run directory.

    Multi-GPU: torchrun --nproc_per_node=N -m guitarformer train ...
    """
    from guitarformer.config import load_config, set_values

    # Options are typed values, set after the YAML overrides and validated with them (a folder named `null` or
    # `1e3` stays a folder name); --resume takes them as overrides of the run's own config.
    asked = {k: v for k, v in (("model.kind", model_kind and model_kind.replace("-", "_")),
                                ("data.dataset", data and str(data)), ("train.max_steps", max_steps),
                                ("train.device", device), ("train.num_threads", threads or None),
                                ("train.init", init)) if v is not None}
    if resume is not None and init is not None:
        raise GuitarformerError("--init starts a new run from another's weights but --resume continues a run",
                                f"drop --init to continue {resume} (a fine-tune resumes as any run)")
    if resume is not None:
        if force:
            raise GuitarformerError("--force starts a run afresh but --resume continues one",
                                    f"drop --force to continue {resume}, or drop --resume to start over there")
        from guitarformer.training.loop import train as run_train
        from guitarformer.config import Config

        flags = list(overrides) + [f"{k}={v}" for k, v in asked.items() if k != "model.kind"]
        summary = run_train(Config(), resume=resume, progress=_progress(), resume_overrides=flags)
    else:
        if config_name is None and model_kind == "encoder-decoder":
            config_name = "encdec-small"
        cfg = set_values(load_config(config_name, list(overrides)), asked)  # errors surface before torch loads
        if init is not None and config_name is None:  # the preset's lr and steps are for random weights
            from guitarformer.training.init import finetune_defaults

            cfg = finetune_defaults(cfg, set(asked) | {o.partition("=")[0].strip() for o in overrides})
        from guitarformer.training.loop import train as run_train

        summary = run_train(cfg, run_dir=run_dir, progress=_progress(), force=force)
    from guitarformer.runtime import teardown_distributed

    teardown_distributed()  # torchrun's ranks: leave the process group before the interpreter exits
    if summary.get("interrupted"):  # checkpoint saved; a scheduler can tell this from a finished run
        click.echo(f"interrupted ({summary['stopped_by']}); resume with: guitarformer train --resume {summary['run_dir']}",
                   err=True)
        sys.exit(130 if "SIGINT" in summary["stopped_by"] else 143)


# ---------------------------------------------------------------- sample


class _Finite(click.FloatRange):
    """A FloatRange that also turns away nan and inf (a plain FloatRange lets nan through every bound)."""

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        if value != value or value in (float("inf"), float("-inf")):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return value


def _list_tunings(ctx, param, value):
    """--tuning list: print the named tunings and stop (eager, so --out is not asked for)."""
    if value is not None and value.strip().lower() == "list":
        from guitarformer.music.guitar import tuning_lines

        for line in tuning_lines():
            click.echo(line)
        ctx.exit(0)
    return value


@main.command(cls=ControlOptions, context_settings=CONTEXT)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="MIDI file to write (riff.mid); with "
              "--num-samples N: riff_000.mid ... Missing folders are created.")
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory, or `pretrained` (default: newest under ./runs, else the shipped model).")
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None, help="A checkpoint file instead of a run.")
@click.option("--num-samples", type=click.IntRange(1, 1024), default=1, show_default=True)
@click.option("--max-new-tokens", type=click.IntRange(1, 65536), default=None,
              help="Token budget per riff (default: the run's sample.max_new_tokens, raised to fit --bars).")
@click.option("--bars", type=click.IntRange(1, 1000), default=None,
              help="New bars to write (after the prompt, with --prompt; default: until the model ends).")
@click.option("--temperature", type=_Finite(0, 100), default=None,
              help="0 = always the likeliest token (default: the run's sample.temperature).")
@click.option("--top-k", type=click.IntRange(0), default=None,
              help="Sample among the k likeliest tokens; 0 = off (default: the run's sample.top_k).")
@click.option("--top-p", type=_Finite(0, 1, min_open=True), default=None,
              help="Nucleus sampling, in (0, 1]; 1 = off (default: the run's sample.top_p).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True,
              help="Riff k of a call depends only on the run, the options, the seed and k.")
@click.option("--prompt", type=click.Path(path_type=Path), default=None,
              help="MIDI/GP/tab/MusicXML file to continue: the output is the file, every part, with new bars "
                   "after the continued part's last bar (a 'generated' marker where they begin), in its tempo, "
                   "time signature, program and tuning.")
@click.option("--tempo", type=_Finite(20, 400), default=None,
              help="Tempo (BPM) of the new bars (default: the prompt's, else the model's choice).")
@click.option("--tuning", default=None, is_eager=True, callback=_list_tunings,
              help="A name, or the open strings low to high: 38,45,50,55,59,64 or 38 45 50 55 59 64 or "
                   "D2 A2 D3 G3 B3 E4 (default: the prompt's, else standard). `--tuning list` shows the names.")
@click.option("--program", type=click.IntRange(0, 127), default=None, help="The General MIDI guitar the file names, "
              "24-31 (default: the prompt's guitar, else 25, steel guitar): the sound only, the notes stay the "
              "model's; with 29-30 (distorted guitar) the tab is fingered as rock riffs.")
@click.option("--batch-size", type=click.IntRange(1, 1024), default=None, help="Riffs generated together "
              "(default: all of --num-samples at once); changes speed and memory, never the riffs.")
@click.option("--wav", "wav_out", type=click.Path(path_type=Path), default=None,
              help="Also render audio (WAV) from the bundled General MIDI soundfont, or $GUITARFORMER_SOUNDFONT.")
@click.option("--tab", "tab_out", type=click.Path(path_type=Path), default=None, help="Also write an ASCII tab.")
@click.option("--gp", "gp_out", type=click.Path(path_type=Path), default=None, help="Also write a Guitar Pro 5 file.")
@click.option("--position", type=click.IntRange(0, 19), default=None,
              help="Re-finger the tab in this position where the notes allow (index finger at this fret; 0 = open).")
@click.option("--track", default=None, help="With --prompt: the part to continue, its number (1 = the first "
              "listed) or its name (default: the first).")
@click.option("--tracks", type=click.Choice(["guitar", "all"]), default="guitar", show_default=True,
              help="Parts --track chooses among: guitar tracks only, or every non-drum track.")
@click.option("--time-signature", default=None,
              help="The time signature of the riff, e.g. 7/8 (REMI/TabREMI runs); auto: each riff's drawn from the "
              "meters of the run's training bars (of the asked style's), as often as they are there; none: the "
              "model's own choice. Default: the run's sample.time_signature, else none.")
@click.option("--guard/--no-guard", default=True, show_default=True, help="Steer the sampler to the asked key, "
              "density and the style's meter where the model alone does not hold them.")
@click.option("--guidance", type=_Finite(0, 100), default=None, help="Classifier-free guidance on the "
              "piece's asked controls (--style, --key, ...): each step leans this far from what the model would "
              "write without them (0: off; default 1 where such a control is asked; twice the model's work).")
@click.option("--form", default=None, help="Which bars repeat an earlier bar, note for note: "
              "auto (a real tune's form, of the --style if given; the default for a model that does not copy by "
              "itself), none (the model alone; the default for one that does, as the shipped model), or letters, "
              "one per phrase of --bars / letters bars: AABB, ABAC (a letter seen before repeats that phrase).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto", show_default=True,
              help="auto: a CUDA or Apple GPU when there is one, else the CPU.")
@_threads
@_compile
def sample(out, run_dir, checkpoint, num_samples, max_new_tokens, bars, temperature, top_k, top_p, seed, prompt,
           tempo, tuning, program, batch_size, wav_out, tab_out, gp_out, position, track, tracks, time_signature,
           guard, guidance, form, device, threads, compile_step, **controls):
    """Generate riffs with a trained model: MIDI (and tab / GP5 / WAV) files.

    Sampling is constrained so every file is valid and playable: the tokenizer's grammar, notes inside
    the tuning's range, never more notes sounding than strings to play them on. A run trained with controls
    (prepare --set data.controls=true) can be asked for a key, density, polyphony, hand position, palm muting,
    techniques, style, tuning, tempo and time signature, bar controls per bar (--density 1-4:low,5-8:high); values
    its training data did not hold are refused with those it knows. Guards (--no-guard: off) steer the key and
    density where the model alone does not hold them. A form (--form) makes bars repeat earlier ones: by default a
    real tune's, drawn per riff.
    """
    from guitarformer.app import Outputs, SampleRequest
    from guitarformer.app import sample as run_sample
    from guitarformer.app.requests import Sampling
    from guitarformer.data.controls import Controls

    outputs = Outputs(midi=out, tab=tab_out, gp=gp_out, wav=wav_out,
                      labels={"midi": "--out", "tab": "--tab", "gp": "--gp", "wav": "--wav"})
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                        guidance=guidance, compile=compile_step)
    req = SampleRequest(outputs=outputs, run=run_dir, checkpoint=checkpoint, device=device, num_samples=num_samples,
                        batch_size=batch_size, bars=bars, sampling=sampling, seed=seed, prompt=prompt, track=track,
                        tracks=tracks, tempo=tempo, tuning=tuning, program=program, position=position,
                        controls=Controls(**controls), time_signature=time_signature, guard=guard, form=form,
                        threads=threads)
    result = run_sample(req)
    for line in result.lines:
        click.echo(line)
    for line in result.warnings:
        click.echo(line, err=True)


# ---------------------------------------------------------------- eval / tab


@main.command("eval", context_settings=CONTEXT)
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory, or `pretrained` (default: newest run, else the shipped model).")
@click.option("--data", type=click.Path(path_type=Path), default=None, callback=_dataset,
              help="Dataset folder or name (default: the run's).")
@click.option("--split", type=click.Choice(["val", "test"]), default="test", show_default=True)
@click.option("--reference", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
              help="Folder of real guitar files for the music metrics (default: the split decoded back).")
@click.option("--num-samples", type=click.IntRange(2, 4096), default=32, show_default=True)
@click.option("--max-new-tokens", type=click.IntRange(1), default=None, help="Default: the run's sample.max_new_tokens.")
@click.option("--no-samples", is_flag=True, help="Likelihood only (no sampling, music or playability metrics).")
@click.option("--order", "ngram_order", type=click.IntRange(1, 8), default=5, show_default=True,
              help="Order of the Kneser-Ney n-gram baseline.")
@click.option("--cont-src", type=click.IntRange(1), default=None, help="Continuation source tokens (default: the "
              "model's src_block_size; a decoder: at most half its context). Use the same value to compare runs.")
@click.option("--cont-tgt", type=click.IntRange(2), default=None, help="Continuation target tokens (default: "
              "what the model fits).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Write every number here.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto")
@click.option("--fingering", "fingering_dir", type=click.Path(path_type=Path, exists=True, file_okay=False),
              default=None, help="Only this: how often the model (a TabREMI decoder) fingers the notes of the "
              "tabs and Guitar Pro files under DIR as their authors did, vs fret(), per folder and pooled.")
@click.option("--batch-size", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="With --fingering: the most rows fingered together (8 beam rows a window; on a CPU a "
              "layout-2 run reads one window at a time, which is faster there).")
@_threads
def eval_cmd(run_dir, data, split, reference, num_samples, max_new_tokens, no_samples, ngram_order, cont_src,
             cont_tgt, seed, json_out, device, fingering_dir, batch_size, threads):
    """Is this model any good? Likelihood vs a Kneser-Ney n-gram, music metrics vs real music, playability.

    Numbers also go to the run's TensorBoard under eval/<split>/. docs/results/EVAL.md says how to read them. The riffs it
    samples are the model alone (its own meters and form, no controls); what `sample` writes with a run's defaults,
    drawn meters and forms, is measured by scripts/bench_eval_riffs.py.
    With --fingering DIR, only the agreement of the model's fingering with human tabs (docs/results/FINGERING_MODEL.md).
    """
    import json

    if fingering_dir is not None:
        from guitarformer.evaluation.fingering import evaluate_folder, format_report
        from guitarformer.generation.fingering import check_fingering_run
        from guitarformer.runs import load_run
        from guitarformer.runtime import resolve_device, set_threads, step_work

        dev = resolve_device(device)
        loaded = load_run(run_dir, None, str(dev))
        model, tokenizer = loaded.model, loaded.tokenizer
        check_fingering_run(model, tokenizer)
        set_threads(threads, step_work(model, batch_size))
        report = evaluate_folder(model, tokenizer, fingering_dir, dev, batch_size)
        click.echo(format_report(report))
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report.as_dict(), indent=2, allow_nan=False))
            click.echo(f"wrote {json_out}")
        return

    from guitarformer.evaluation.report import evaluate_run, format_table, jsonable, log_tensorboard

    res = evaluate_run(run_dir, data, split, device, reference=reference, num_samples=num_samples,
                       max_new_tokens=max_new_tokens, samples=not no_samples, ngram_order=ngram_order,
                       cont_src=cont_src, cont_tgt=cont_tgt, seed=seed, threads=threads,
                       progress=(lambda s: click.echo(f"eval: {s}", err=True)) if _progress() else None)
    click.echo(format_table(res))
    if not log_tensorboard(Path(res["run"]), res):
        click.echo("eval: the shipped model's folder is part of the package: nothing logged to TensorBoard "
                   "(--json FILE keeps every number)", err=True)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(jsonable(res), indent=2, allow_nan=False))
        click.echo(f"wrote {json_out}")


def _bar_range(ctx, param, value):
    """--bars 5-8 / --bars 5 as (first, last), 1-based."""
    if value is None:
        return None
    text = value.replace(" ", "")
    try:
        first, _, last = text.partition("-")
        a, b = int(first), int(last or first)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a bar range; write it like 5-8 or 5") from None
    if not 1 <= a <= b:
        raise click.BadParameter(f"{value!r}: bars count from 1 and the first comes before the last")
    return a, b


@main.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write to FILE instead of printing: .txt for the ASCII tab, .gp5 for Guitar Pro 5.")
@click.option("--track", default=None, help="Only this track: its number (1 = the first listed) or its name.")
@click.option("--tracks", type=click.Choice(["guitar", "all"]), default="guitar", show_default=True,
              help="Which tracks of a MIDI/Guitar Pro/MusicXML file to show: guitar tracks only, or every "
                   "non-drum track.")
@click.option("--bars", "bar_range", callback=_bar_range, default=None, metavar="A-B",
              help="Only these bars (numbered from 1, as the tab numbers them), e.g. 5-8.")
@click.option("--tuning", default=None, is_eager=True, callback=_list_tunings,
              help="Override the tuning: a name, MIDI numbers or note names low to high; `--tuning list` shows the names.")
@click.option("--width", type=click.IntRange(20), default=80, show_default=True,  # render.ascii_tab.MIN_WIDTH
              help="Characters per tab line (at least 20); systems wrap to it.")
@click.option("--position", type=click.IntRange(0, 19), default=None,
              help="Re-finger in this position where the notes allow (index finger at this fret; 0 = open).")
@click.option("--program", type=click.IntRange(0, 127), default=None,
              help="Re-finger as this General MIDI program is played (29-30, distorted guitar: rock riffs; "
                   "default: each track's own program).")
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="Let this run's model (a decoder on TabREMI tab tokens) choose every note's string and fret. "
                   "fret() (the default) matches human tabs more often than any model measured so far "
                   "(docs/results/FINGERING_MODEL.md); a run that only saw fret()'s strings says so.")
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None,
              help="As --run, from a checkpoint file inside its run directory.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto", show_default=True,
              help="Where the --run model runs.")
@_threads
def tab(file, out, track, tracks, bar_range, tuning, width, position, program, run_dir, checkpoint, device, threads):
    """Show a playable tab of any MIDI, Guitar Pro (3-8), MusicXML/ABC or ASCII tab file: printed, or written to
    --out as text or Guitar Pro 5. A file's own fingering is kept unless --tuning, --position or --program asks
    for another, or --run lets a tab-token model finger it; notes the tuning cannot hold are reported, never
    dropped silently."""
    from guitarformer.app import TabRequest
    from guitarformer.app import tab as run_tab
    from guitarformer.app.requests import outputs_by_suffix

    outputs = outputs_by_suffix("--out", [out], ("tab", "gp"))
    result = run_tab(TabRequest(file=file, outputs=outputs, track=track, tracks=tracks, bars=bar_range,
                                tuning=tuning, width=width, position=position, program=program, run=run_dir,
                                checkpoint=checkpoint, device=device, threads=threads))
    if out is None:
        click.echo(result.text, nl=False)
    for line in result.warnings:
        click.echo(f"warning: {line}", err=True)
    for line in result.notes:
        click.echo(f"note: {line}", err=True)
    if out is not None:
        click.echo(f"wrote {out}")


# ---------------------------------------------------------------- infill


@main.command(context_settings=CONTEXT)
@click.argument("song", type=click.Path(path_type=Path))
@click.option("--bars", "bar_range", callback=_bar_range, required=True, metavar="A-B",
              help="The bars to write again (numbered from 1, as `tab` numbers them), e.g. 5-8.")
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="The song with the new bars: .mid (MIDI), .txt (ASCII tab) or .gp5 (Guitar Pro 5).")
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory trained with data.infill > 0, or `pretrained` (default: newest under ./runs).")
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None, help="A checkpoint file instead of a run.")
@click.option("--track", default=None, help="The part to fill, where the file has several: its number (1 = the "
              "first listed) or its name (default: the first).")
@click.option("--tracks", type=click.Choice(["guitar", "all"]), default="guitar", show_default=True,
              help="Parts --track chooses among: guitar tracks only, or every non-drum track.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True)
@click.option("--temperature", type=_Finite(0, 100), default=None, help="Default: the run's sample.temperature.")
@click.option("--top-k", type=click.IntRange(0), default=None, help="0 = off (default: the run's sample.top_k).")
@click.option("--top-p", type=_Finite(0, 1, min_open=True), default=None, help="Default: the run's sample.top_p.")
@click.option("--max-new-tokens", type=click.IntRange(1, 65536), default=None,
              help="Token budget of the fill (default: twice what the bars take in the song).")
@click.option("--candidates", type=click.IntRange(1), default=None,
              help="Fills sampled at once; the one that best fits the bars around the gap (their pitches, "
              "durations and onsets), the model's likelihood breaking near-ties, is kept (default 8; 1: the first "
              "fill drawn).")
@click.option("--tab", "tab_out", type=click.Path(path_type=Path), default=None, help="Also write an ASCII tab.")
@click.option("--gp", "gp_out", type=click.Path(path_type=Path), default=None, help="Also write a Guitar Pro 5 file.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto", show_default=True)
@_threads
def infill(song, bar_range, out, run_dir, checkpoint, track, tracks, seed, temperature, top_k, top_p,
           max_new_tokens, candidates, tab_out, gp_out, device, threads):
    """Write bars A-B of SONG (MIDI, Guitar Pro, ASCII tab, MusicXML, ABC) again with a model trained with
    infilling, given the bars before and after them; every other note stays as written (time, string, fret,
    techniques)."""
    from guitarformer.app import InfillRequest
    from guitarformer.app import infill as run_infill
    from guitarformer.app.requests import outputs_by_suffix

    outputs = outputs_by_suffix("--out", [out], ("midi", "tab", "gp"), tab=tab_out, gp=gp_out)
    result = run_infill(InfillRequest.of(song=song, bars=bar_range, outputs=outputs, track=track, tracks=tracks,
                                         run=run_dir, checkpoint=checkpoint, device=device, seed=seed,
                                         temperature=temperature, top_k=top_k, top_p=top_p,
                                         max_new_tokens=max_new_tokens, threads=threads,
                                         **({} if candidates is None else {"candidates": candidates})))
    for line in result.warnings:
        click.echo(line, err=True)
    for line in result.lines:
        click.echo(line)


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------- studio


@main.command(context_settings=CONTEXT)
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory, or `pretrained` (default: the newest under ./runs, else the shipped model).")
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None, help="A checkpoint file instead of a run.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Another address makes the page reachable from other machines (it has no login: a warning says so).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="cpu", show_default=True)
@_threads
@_compile
def studio(run_dir, checkpoint, port, host, device, threads, compile_step):
    """A page in your browser: generate riffs, see their tab and notation, hear them, regenerate bars, continue a
    file, download MIDI, Guitar Pro 5, ASCII tab and WAV (docs/studio.md; the JSON API under /api)."""
    from guitarformer.studio import serve

    serve(run_dir, checkpoint, host=host, port=port, device=device, threads=threads, compile=compile_step)

