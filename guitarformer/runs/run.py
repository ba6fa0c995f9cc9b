"""A run loaded: its model, tokenizer and config, its folder (RunDir), and what it learned (styles, controls, the
forms of its tunes: what `sample` may ask of it).

`read_run` reads what the run's files say without its weights (config.yaml, tokenizer.json, the counts beside
them), so a request the run cannot honour is refused before the weights load; `Run.load_weights` then builds the
model from its checkpoint. `load_run` does both: the public API's one way to load a run. The CLI loads a run per
command; the studio keeps one Run and passes it to every request, so the weights are read once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from guitarformer.config import Config
from guitarformer.data.corpus import builtin_dataset_name, default_dataset_dir
from guitarformer.data.dataset import TokenSplit
from guitarformer.vocab.seen import Seen, from_vocabulary, read_seen, summarize
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.compose.form import FormCounts, read_forms
from guitarformer.models import build_model
from guitarformer.runs.checkpoint import load_checkpoint
from guitarformer.runs.migrate import read_saved
from guitarformer.runs.rundir import RunDir, RunState, checkpoint_of, shipped_note
from guitarformer.runtime import resolve_device


@dataclass
class Run:
    """A run ready to sample (`model` None until `load_weights`): tokenizer, config, folder, which checkpoint."""

    model: torch.nn.Module | None
    tokenizer: Any  # a miditok tokenizer
    cfg: Config
    dir: RunDir
    checkpoint: Path
    device: torch.device
    state: RunState = field(default_factory=RunState)
    step: int | None = None  # the optimizer step the checkpoint was saved at (known once the weights are read)
    val_loss: float | None = None  # the best validation loss the run had reached at that step
    named: bool = False  # the user named the run or checkpoint (False: the default one was taken)
    name: str = ""  # how it was named where that is recorded: "pretrained" or the run's full path (train --init)
    seen: Seen | None = None  # what its training data held, per control (data/seen.py)
    forms: FormCounts | None = None  # the forms of its training tunes (generation/form.py; None: not at hand)
    saved: dict[str, Any] | None = field(default=None, repr=False)  # the checkpoint, where already read

    @property
    def run_dir(self) -> Path:
        return self.dir.path

    @property
    def kind(self) -> str:
        return self.cfg.model.kind

    def load_weights(self) -> Run:
        """Build the model from the checkpoint (its config is the run's) on the run's device; returns self."""
        if self.model is not None:
            return self
        ck = self.checkpoint
        saved = self.saved if self.saved is not None else load_checkpoint(ck)
        self.cfg, self.state = read_saved(saved["config"], self.dir, self.tokenizer)
        model = build_model(self.cfg.model)
        try:
            model.load_state_dict(saved["model"])
        except (RuntimeError, KeyError, TypeError) as e:
            raise GuitarformerError(f"checkpoint {ck} does not match its own config ({str(e).splitlines()[0][:200]})",
                                    "use the checkpoint with the run directory (config.yaml) it was trained in") from None
        self.model, self.saved = model.to(self.device).eval(), None
        step, val = saved.get("step"), saved.get("best_val")
        self.step = int(step) if isinstance(step, int) else None
        finite = isinstance(val, (int, float)) and val == val and val != float("inf")
        self.val_loss = float(val) if finite else None
        return self

    def describe(self) -> str:
        """One line naming the run: folder, checkpoint, step and validation loss."""
        facts = [self.checkpoint.name] + ([] if self.step is None else [f"step {self.step}"]) + \
            ([] if self.val_loss is None else [f"val loss {self.val_loss:.3f}"])
        if self.dir.is_shipped:  # say which model, and why where none was named
            return f"{shipped_note(named=self.named)} ({', '.join(facts)})"
        if self.cfg.train.init:
            facts.append(f"fine-tuned from {self.cfg.train.init}")
        line = f"run {self.run_dir} ({', '.join(facts)})"
        if not self.named:  # a run of the user's took the shipped model's place: say why, and how to go back
            line += "; the newest under ./runs, as no --run was named (--run pretrained: the shipped model)"
        return line


def read_run(run: str | Path | None = None, checkpoint: str | Path | None = None, device: str = "cpu") -> Run:
    """A run's facts without its weights: a run directory (default: the newest under ./runs, else the shipped model)
    or a checkpoint file; `device` ("auto": a GPU when there is one) is where `load_weights` puts the model."""
    ck = checkpoint_of(run, checkpoint)
    rd = RunDir.of_checkpoint(ck)
    if not ck.is_file():
        raise GuitarformerError(f"checkpoint {ck} does not exist", "train first (`guitarformer train`) or pass --checkpoint FILE")
    if not rd.tokenizer_path.is_file():
        raise GuitarformerError(f"no tokenizer.json beside {ck}", "keep checkpoints inside their run directory (ckpt/..)")
    tokenizer = load_tokenizer(rd.tokenizer_path)
    saved = None
    if rd.config_path.is_file():  # the config the run trained with; the checkpoint carries it too
        config = yaml.safe_load(rd.config_path.read_text()) or {}
    else:
        saved = load_checkpoint(ck)
        config = saved["config"]
    cfg, state = read_saved(config, rd, tokenizer)
    return Run(None, tokenizer, cfg, rd, ck, resolve_device(device), state,
               named=run is not None or checkpoint is not None, seen=seen_of_run(rd, cfg, tokenizer),
               forms=forms_of_run(rd), saved=saved)


def load_run(run: str | Path | None = None, checkpoint: str | Path | None = None, device: str = "cpu") -> Run:
    """A run loaded from a run directory (best, else last checkpoint) or a checkpoint file, its model on `device`
    ("auto": a GPU when there is one); with neither, the newest run under ./runs, else the shipped model."""
    return read_run(run, checkpoint, device).load_weights()


def _dataset_of(cfg: Config) -> Path:
    """The run's dataset folder: the configured one, or the built-in corpus prepared with its settings."""
    return Path(cfg.data.dataset).expanduser() if cfg.data.dataset else \
        default_dataset_dir().with_name(builtin_dataset_name(cfg.data))


def _name(rd: RunDir) -> str:
    return "the shipped model" if rd.is_shipped else rd.path.name


def seen_of_run(run: RunDir | Path, cfg: Config, tokenizer) -> Seen:
    """What a run's training data held: the summary beside its tokenizer (`prepare` writes it into the dataset, and
    the shipped model carries its own), else its dataset's (the configured folder or the built-in corpus prepared
    with its settings), counted from the token arrays where the dataset has none yet, else its vocabulary."""
    rd = run if isinstance(run, RunDir) else RunDir(run)
    seen = read_seen(rd.path, f"the training data of {_name(rd)}")
    if seen is not None:
        return seen
    if getattr(tokenizer, "is_trained", False):  # BPE ids are merges: the counts are of base tokens only
        return from_vocabulary(tokenizer.vocab)
    data = _dataset_of(cfg)
    return read_seen(data) or count_dataset(data, tokenizer.vocab) or from_vocabulary(tokenizer.vocab)


def forms_of_run(run: RunDir | Path) -> FormCounts | None:
    """The forms of a run's training tunes: the file `train` writes beside its tokenizer (the shipped model carries
    its own); None for runs from before it (`sample --form auto` then falls back to none, and says so)."""
    rd = run if isinstance(run, RunDir) else RunDir(run)
    return read_forms(rd.path, f"the tunes {_name(rd)} was trained on")


def count_dataset(folder: Path, vocab: dict[str, int]) -> Seen | None:
    """The counts of a prepared dataset's train split, for datasets prepared before `prepare` wrote them (None where
    the dataset is not at hand)."""
    try:
        split = TokenSplit(folder, "train")
    except (GuitarformerError, OSError, ValueError, KeyError):
        return None
    pieces = (split.sequence(i) for i in range(split.num_sequences))
    return summarize(vocab, pieces, f"the training data of {folder}")
