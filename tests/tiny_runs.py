"""An untrained tiny run directory (tokenizer.json + ckpt/last.pt) for tests that sample from a model's shape,
not its skill."""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from guitarformer.config import Config, ModelConfig
from guitarformer.models import build_model
from guitarformer.runs.checkpoint import save_checkpoint


def untrained_run(run: Path, tok, block_size: int, seed: int = 0, max_new_tokens: int | None = None) -> Path:
    """Write a 1-layer, 32-wide decoder for `tok` (initialised from `seed`) as a run directory at `run`."""
    cfg = Config()
    cfg.data.tokenizer = type(tok).__name__
    cfg.model = ModelConfig(vocab_size=len(tok), block_size=block_size, n_layer=1, n_head=2, n_embd=32, dropout=0.0)
    if max_new_tokens is not None:
        cfg.sample.max_new_tokens = max_new_tokens
    tok.save(run / "tokenizer.json")
    torch.manual_seed(seed)
    model = build_model(copy.deepcopy(cfg.model))
    save_checkpoint(run / "ckpt" / "last.pt", {"config": copy.deepcopy(cfg).to_dict(), "model": model.state_dict()})
    return run
