"""A run loaded once (model, tokenizer, config and what the run is) and what it can be asked for.

The CLI loads a run per command; the studio keeps one `LoadedRun` and passes it to every request, so the weights
are read once. `run_info` tells a caller (the studio's form, `sample --help` in a script) which options this run
honours and with which values, before anything is sampled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from guitarformer.config import Config
from guitarformer.errors import GuitarformerError
from guitarformer.vocab.controls import option_controls
from guitarformer.data.corpus import builtin_dataset_name, default_dataset_dir
from guitarformer.vocab.infill import has_fill_tokens
from guitarformer.data.dataset import TokenSplit
from guitarformer.vocab.seen import Seen, from_vocabulary, read_seen, summarize
from guitarformer.vocab.parts import band_roles
from guitarformer.vocab.tab_tokens import has_controls, is_tab_tokenizer
from guitarformer.vocab.tokenization import bar_ids
from guitarformer.compose.form import FormCounts, read_forms
from guitarformer.music.guitar import GUITAR_PROGRAMS, TUNINGS
from guitarformer.pretrained import pretrained_dir, shipped_note
from guitarformer.runs import checkpoint_of, load_run
from guitarformer.runs.checkpoint import checkpoint_facts
from guitarformer.runtime import resolve_device

NO_CONTROLS = "this run was trained without control tokens (prepare with --set data.controls=true)"


@dataclass
class LoadedRun:
    """A run ready to sample: its model on `device`, tokenizer and config, and which checkpoint of which run."""

    model: torch.nn.Module
    tokenizer: Any  # a miditok tokenizer
    cfg: Config
    run_dir: Path
    checkpoint: Path
    step: int | None  # the optimizer step the checkpoint was saved at
    val_loss: float | None  # the best validation loss the run had reached at that step
    device: torch.device
    seen: Seen | None = None  # what its training data held, per control (vocab/seen.py)
    forms: FormCounts | None = None  # the forms of its training tunes (compose/form.py; None: not at hand)
    named: bool = False  # the user named the run or checkpoint (False: the default one was taken)

    @property
    def kind(self) -> str:
        return self.cfg.model.kind

    def describe(self) -> str:
        """One line naming the run: folder, checkpoint, step and validation loss."""
        facts = [self.checkpoint.name] + ([] if self.step is None else [f"step {self.step}"]) + \
            ([] if self.val_loss is None else [f"val loss {self.val_loss:.3f}"])
        if self.run_dir.resolve() == pretrained_dir():  # say which model, and why where none was named
            return f"{shipped_note(named=self.named)} ({', '.join(facts)})"
        if self.cfg.train.init:
            facts.append(f"fine-tuned from {self.cfg.train.init}")
        line = f"run {self.run_dir} ({', '.join(facts)})"
        if not self.named:  # a run of the user's took the shipped model's place: say why, and how to go back
            line += "; the newest under ./runs, as no --run was named (--run pretrained: the shipped model)"
        return line


def load_run_once(run: str | Path | None = None, checkpoint: str | Path | None = None,
                  device: str = "cpu") -> LoadedRun:
    """Load a run directory (default: the newest under ./runs) or a checkpoint file on `device` ("auto": a GPU
    when there is one)."""
    dev = resolve_device(device)
    path = checkpoint_of(run, checkpoint)
    model, tokenizer, cfg = load_run(run, checkpoint, str(dev))
    step, val_loss = checkpoint_facts(path)
    run_dir = path.parent.parent
    return LoadedRun(model, tokenizer, cfg, run_dir, path, step, val_loss, dev, seen_of_run(run_dir, cfg, tokenizer),
                     forms_of_run(run_dir), named=run is not None or checkpoint is not None)


def _dataset_of(cfg: Config) -> Path:
    """The run's dataset folder: the configured one, or the built-in corpus prepared with its settings."""
    return Path(cfg.data.dataset).expanduser() if cfg.data.dataset else \
        default_dataset_dir().with_name(builtin_dataset_name(cfg.data))


def seen_of_run(run_dir: Path, cfg: Config, tokenizer) -> Seen:
    """What a run's training data held: the summary beside its tokenizer (`prepare` writes it into the dataset, and
    the shipped model carries its own), else its dataset's (the configured folder or the built-in corpus prepared
    with its settings), counted from the token arrays where the dataset has none yet, else its vocabulary."""
    seen = read_seen(run_dir, f"the training data of {run_dir.name if run_dir != pretrained_dir() else 'the shipped model'}")
    if seen is not None:
        return seen
    if getattr(tokenizer, "is_trained", False):  # BPE ids are merges: the counts are of base tokens only
        return from_vocabulary(tokenizer.vocab)
    data = _dataset_of(cfg)
    return read_seen(data) or count_dataset(data, tokenizer.vocab) or from_vocabulary(tokenizer.vocab)


def forms_of_run(run_dir: Path) -> FormCounts | None:
    """The forms of a run's training tunes: the file `train` writes beside its tokenizer (the shipped model carries
    its own); None for runs from before it (`sample --form auto` then falls back to none, and says so)."""
    return read_forms(run_dir, f"the tunes {run_dir.name if run_dir != pretrained_dir() else 'the shipped model'} "
                               "was trained on")


def count_dataset(folder: Path, vocab: dict[str, int]) -> Seen | None:
    """The counts of a prepared dataset's train split, for datasets prepared before `prepare` wrote them (None where
    the dataset is not at hand)."""
    try:
        split = TokenSplit(folder, "train")
    except (GuitarformerError, OSError, ValueError, KeyError):
        return None
    pieces = (split.sequence(i) for i in range(split.num_sequences))
    return summarize(vocab, pieces, f"the training data of {folder}")


@dataclass
class OptionInfo:
    """Whether a run honours an option, why not, and the values it knows (None: any value of the option's type)."""

    available: bool
    reason: str | None = None
    values: list[str] | None = None


@dataclass
class RunInfo:
    run_dir: Path
    kind: str
    step: int | None
    val_loss: float | None
    can_infill: bool
    tokenizer: str
    options: dict[str, OptionInfo]
    init: str | None = None  # the run it was fine-tuned from (train --init), if any


def _vocab_values(vocab: dict[str, int], token_type: str) -> list[str]:
    return sorted(t.split("_", 1)[1] for t in vocab if t.startswith(token_type + "_"))


def _control_options(tokenizer, seen: Seen) -> dict[str, OptionInfo]:
    """Each registered control's option and the values the run offers (`Control.offered`: those its training data
    held; the hand position: every one, as the sampler holds it)."""
    if not has_controls(tokenizer):
        return {name: OptionInfo(False, NO_CONTROLS) for name in option_controls()}
    out = {}
    for name, ctrl in option_controls().items():
        values = ctrl.offered(seen)
        out[name] = OptionInfo(True, None, values) if values else \
            OptionInfo(False, f"this run learned no {name.replace('_', ' ')} values ({seen.source})")
    return out


def run_info(loaded: LoadedRun) -> RunInfo:
    """What `loaded` is and which `sample` options it honours (OptionInfo per option)."""
    tok = loaded.tokenizer
    seen = loaded.seen or seen_of_run(loaded.run_dir, loaded.cfg, tok)
    meters = (seen.known("TimeSig") if seen.counts.get("TimeSig") else _vocab_values(tok.vocab, "TimeSig")) \
        if bar_ids(tok) else []
    tunings = seen.known("Tuning") if seen.counts.get("Tuning") else sorted(TUNINGS)
    always = OptionInfo(True)
    options = {"bars": always, "temperature": always, "top_p": always, "seed": always,
               "tempo": OptionInfo(True, None, None),  # any number in the range seen (conditioning.check_seen)
               "tuning": OptionInfo(True, None, tunings),
               # auto, none or letters (compose/form.py): any run (auto is none where its tunes are not at hand)
               "form": OptionInfo(True, None, None),
               # the sound the file names, not a control: the General MIDI guitars
               "program": OptionInfo(True, None, [str(p) for p in GUITAR_PROGRAMS]),
               "time_signature": OptionInfo(True, None, meters) if meters else
               OptionInfo(False, f"this run's tokens ({type(tok).__name__}) have no time signatures"),
               # the band (vocab/parts.py): the parts a run that learned it writes together
               "parts": OptionInfo(True, None, band_roles(tok)) if band_roles(tok) else
               OptionInfo(False, "this run's tokens carry one part (a band run writes guitar, bass and drums)"),
               **_control_options(tok, seen)}
    can_infill = is_tab_tokenizer(tok) and has_fill_tokens(tok) and loaded.cfg.data.infill > 0
    return RunInfo(loaded.run_dir, loaded.kind, loaded.step, loaded.val_loss, can_infill, type(tok).__name__,
                   options, loaded.cfg.train.init)


# How a guitarist names what a run learned, per option and value (the rest as the values are written)
_PLAIN = {"polyphony": {"single": "single notes", "dyads": "dyads", "chords": "chords"},
          "palm_mute": {"most": "palm mutes", "some": "palm mutes"},
          "tuning": {"standard": "standard tuning", "drop-d": "drop D", "drop-c": "drop C",
                     "seven-string": "7-string", "half-step-down": "half a step down", "d-standard": "D standard",
                     "open-g": "open G", "open-d": "open D", "dadgad": "DADGAD"}}


def plain_words(loaded: LoadedRun, info: RunInfo) -> str:
    """What a run plays, in a guitarist's words and without a path: which model, its styles, tunings and textures,
    and whether it rewrites bars ("The shipped model: rock, classical, reel, jig, ...; standard tuning, drop D;
    single notes, dyads, chords, palm mutes; rewrites chosen bars")."""
    shipped = loaded.run_dir.resolve() == pretrained_dir()
    who = "The shipped model" if shipped else f"Your run {loaded.run_dir.name}"
    def values(option: str) -> list[str]:
        o = info.options.get(option)
        return list(o.values or []) if o is not None and o.available else []
    plain = lambda option: [_PLAIN.get(option, {}).get(v, v) for v in values(option)]  # noqa: E731
    groups = [", ".join(values("style")), ", ".join(dict.fromkeys(plain("tuning"))),
              ", ".join(dict.fromkeys([*plain("polyphony"), *(p for p in plain("palm_mute") if p != "none")]))]
    return f"{who}: " + "; ".join(g for g in groups if g) + ("; rewrites chosen bars" if info.can_infill else "")
