"""An untrained tiny run directory (tokenizer.json + ckpt/last.pt) for tests that sample from a model's shape,
not its skill; and a token dataset folder written from given id sequences."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import torch

from guitarformer.config import Config, ModelConfig
from guitarformer.models import build_model
from guitarformer.runs.checkpoint import save_checkpoint


def untrained_run(run: Path, tok, block_size: int, seed: int = 0, max_new_tokens: int | None = None) -> Path:
    """Write a 1-layer, 32-wide decoder for `tok` (initialised from `seed`) as a run directory at `run`."""
    cfg = Config()
    cfg.data.tokenizer = type(tok).__name__
    cfg.model = ModelConfig(prev_token=False, copy=False,
                            vocab_size=len(tok), block_size=block_size, n_layer=1, n_head=2, n_embd=32, dropout=0.0)
    if max_new_tokens is not None:
        cfg.sample.max_new_tokens = max_new_tokens
    tok.save(run / "tokenizer.json")
    torch.manual_seed(seed)
    model = build_model(copy.deepcopy(cfg.model))
    save_checkpoint(run / "ckpt" / "last.pt", {"config": copy.deepcopy(cfg).to_dict(), "model": model.state_dict()})
    return run


def token_dataset(folder: Path, tok, seqs: list[list[int]]) -> Path:
    """A dataset folder as prepare writes one (tokenizer.json, meta.json, train.bin, train.idx.npy) holding `seqs`
    as its train split."""
    folder.mkdir()
    tok.save(folder / "tokenizer.json")
    flat = np.asarray([i for s in seqs for i in s], dtype=np.uint16)
    (folder / "train.bin").write_bytes(flat.tobytes())
    np.save(folder / "train.idx.npy", np.cumsum([0] + [len(s) for s in seqs]))
    (folder / "meta.json").write_text(json.dumps({"dtype": "uint16", "tokens": {"train": int(flat.size)}}))
    return folder
