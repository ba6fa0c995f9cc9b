"""What a run trains and validates on: the dataset folder (the user's, or the built-in corpus prepared on first use)
and the train/val sources of the configured model kind."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed

from guitarformer.config import Config
from guitarformer.data.corpus import ensure_builtin_dataset
from guitarformer.data.dataset import (PLAIN, DecoderWindows, PairLayout, PitchShifter, Seq2SeqPairs, TokenSplit,
                                       note_ids)
from guitarformer.data.prepare import load_meta
from guitarformer.vocab.tokenization import load_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.runtime import Dist


def _windows(split: TokenSplit, cfg: Config, tokenizer, shifter: PitchShifter | None = None, infill: float = 0.0,
             control_dropout: float | None = None):
    """A decoder's source: windows of the token stream."""
    return DecoderWindows(split, cfg.model.block_size, shifter, infill=infill,
                          control_dropout=cfg.data.control_dropout if control_dropout is None else control_dropout,
                          control_plain=cfg.data.control_plain if control_dropout is None else 0.0,
                          control_targets=cfg.data.control_targets, piece_starts=cfg.data.piece_starts)


def _pairs(split: TokenSplit, cfg: Config, tokenizer, shifter: PitchShifter | None = None, infill: float = 0.0,
           control_dropout: float | None = None):
    """An encoder-decoder's source: (source bars, target bars) pairs."""
    m = cfg.model
    return Seq2SeqPairs(split, PairLayout.of(tokenizer, m.src_block_size, m.block_size), shifter=shifter, infill=infill,
                        control_dropout=cfg.data.control_dropout if control_dropout is None else control_dropout,
                        control_plain=cfg.data.control_plain if control_dropout is None else 0.0,
                        control_targets=cfg.data.control_targets)


# The data source each model kind trains on (data/dataset.py; models/kinds.py reads its batches).
_SOURCES = {"decoder": _windows, "encoder_decoder": _pairs}


class Data:
    """Train/val sources for the configured model kind, with the tokenizer that made them.

    A dataset too small to have val files validates on its training data (`val_is_train`): the val numbers then
    say how well the model fits, not how well it generalises, and the run says so. Validation reads the plain
    stream (no control tokens, no infilling examples), so a run with controls and one without score the same
    tokens and their nats per note compare (REMI's too): `note_ids` are the notes counted.
    """

    def __init__(self, cfg: Config, dataset: Path):
        self.dataset = dataset
        self.meta = load_meta(dataset)
        self.tokenizer = load_tokenizer(dataset / "tokenizer.json")
        train = TokenSplit(dataset, "train")
        val = TokenSplit(dataset, "val")
        if len(train) < 2:
            held_out = sum(self.meta.get("sequences", {}).get(k, 0) for k in ("val", "test"))
            if held_out:  # a handful of files, all drawn into the held-out splits
                raise GuitarformerError(
                    f"dataset {dataset} has no training tokens: its {held_out} sequence(s) all landed in the val/test "
                    "splits (prepare holds out about 1 file in 20 for each, chosen by content)",
                    "add more files (a few dozen give every split some) and prepare again")
            raise GuitarformerError(f"dataset {dataset} has no training tokens",
                                    "prepare a folder with readable guitar files (see its manifest.jsonl for reasons)")
        self.val_is_train = len(val) < 2
        if self.val_is_train:
            val = train
        shifter = PitchShifter(self.tokenizer, cfg.data.transpose) if cfg.data.transpose > 0 else None
        source = _SOURCES[cfg.model.kind]
        self.train = source(train, cfg, self.tokenizer, shifter=shifter, infill=cfg.data.infill)
        self.val = source(val, cfg, self.tokenizer, control_dropout=PLAIN)
        self.note_ids = note_ids(self.tokenizer)

    @property
    def val_split(self) -> str:
        """The split the val numbers come from."""
        return "train" if self.val_is_train else "val"

    def val_warning(self) -> str:
        files = self.meta.get("status", {}).get("ok", self.meta.get("sequences", {}).get("train", 0))
        return (f"dataset {self.dataset} has no validation files ({files} usable files, all in train); validating "
                "on training data, so val/ numbers measure fit, not generalisation — add files (about 1 in 20 goes "
                "to val) and prepare again")


def resolve_dataset(cfg: Config, dist: Dist, progress: bool = True) -> Path:
    """The configured dataset folder, or the built-in corpus (prepared by rank 0 on first use)."""
    if cfg.data.dataset:
        p = Path(cfg.data.dataset).expanduser()
        load_meta(p)  # clear error when missing or incomplete
        return p

    if dist.main:
        path = ensure_builtin_dataset(cfg.data, progress=progress)
    if dist.world > 1:
        torch.distributed.barrier()
    if not dist.main:
        path = ensure_builtin_dataset(cfg.data, progress=False)
    return path
