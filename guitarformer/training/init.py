"""Starting a run from another run's weights (`guitarformer train --init pretrained|RUN_DIR|CKPT`): fine-tuning.

Not a resume: the new run has its own directory, a fresh optimizer and learning-rate schedule, and trains on the
user's dataset. What it takes from the init run:

- the architecture (the model section's shape): a config that asks for another shape is refused, since the
  weights would not fit it. A shape value is taken as asked when it differs from the init run's and from the
  default config (a default left alone is the init run's);
- the tokens: the dataset must be tokenized as the init run was (same tokenizer class and settings, every token
  at the same id), with new tokens (styles of the user's folders) only after the init run's. `guitarformer
  prepare FILES --like pretrained` makes such a dataset (tokenization.extended_tokenizer); any other is refused
  with that fix;
- the training mix (controls, control dropout, infilling, transposition) unless the config changes it, so that
  a fine-tune keeps what the init model can be asked for;
- the weights: every tensor copied; where the vocabulary grew, the embedding (and the tied output layer) gets one
  row per new token, the mean of the init run's rows of that token's type (a new style starts as the average
  style), so the old ids' rows and the model's predictions over the old vocabulary are unchanged at step 0.

The preset's learning rate and step count are for random weights; `train --init` without a --config takes the
fine-tune recipe (FINETUNE, chosen by benchmarks/bench_finetune.py: docs/results/FINETUNE.md) for each of them the user
does not set (`finetune_defaults`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable

import miditok
import torch

from guitarformer.config import Config, load_config, set_values, validate
from guitarformer.vocab.tokenization import tokens_differ
from guitarformer.errors import GuitarformerError
from guitarformer.runs import PRETRAINED, Run, named_checkpoint, read_run
from guitarformer.runs.checkpoint import checkpoint_facts, load_checkpoint

# The model settings the weights depend on (dropout and the vocabulary size are not among them).
SHAPE_KEYS = ("kind", "n_layer", "n_enc_layer", "n_head", "n_embd", "block_size", "src_block_size", "bias", "pos",
              "ffn", "ffn_mult", "tie_weights", "prev_token", "copy")
# Data settings a fine-tune inherits unless the config changes them: what the tokens are, and the training mix.
TOKEN_KEYS = ("tokenizer", "num_velocities", "use_tempos", "use_time_signatures", "bpe_vocab_size", "bpe_model",
              "controls")
MIX_KEYS = ("control_dropout", "control_plain", "control_targets", "piece_starts", "infill", "transpose")
# The fine-tune recipe `train --init` takes where the user sets none: a lower peak learning rate than the preset's
# (which trains random weights) and a step count a CPU runs in minutes (docs/results/FINETUNE.md).
FINETUNE = {"train.lr": 1e-3, "train.max_steps": 40}


def load_init(name: str | Path) -> Run:
    """The run named by `name`: "pretrained", a run directory or a checkpoint file (runs.named_checkpoint), read
    without its weights (`init_weights` copies them from its checkpoint, in the dtype they were saved in)."""
    init = read_run(checkpoint=named_checkpoint(name))
    init.name = PRETRAINED if str(name) == PRETRAINED else str(Path(name).expanduser().resolve())
    return init


def init_record(init: Run, added: list[str], val_loss: float | None = None) -> dict[str, Any]:
    """What summary.json records of the run a fine-tune started from: `added` the tokens its vocabulary adds,
    `val_loss` the init weights' val loss on the fine-tune's data (step 0)."""
    return {"from": init.name, "checkpoint": str(init.checkpoint.resolve()),
            "step": checkpoint_facts(init.checkpoint)[0], "vocab_size": len(init.tokenizer),
            "added_tokens": added, "val_loss_at_init": val_loss}


def finetune_defaults(cfg: Config, given: Iterable[str]) -> Config:
    """`cfg` with the fine-tune recipe (FINETUNE) for every setting not in `given` (the `section.key` names the
    user set: options and --set)."""
    asked = set(given)
    return set_values(cfg, {k: v for k, v in FINETUNE.items() if k not in asked})


def init_config(cfg: Config, init: Run) -> Config:
    """`cfg` with the init run's architecture, token settings and (unless `cfg` changes them) training mix; a shape
    `cfg` asks for that the init weights do not have is a GuitarformerError."""
    default = load_config()  # the default preset: what `guitarformer train` asks when no option names a shape
    clash = [k for k in SHAPE_KEYS if getattr(cfg.model, k) != getattr(init.cfg.model, k)
             and getattr(cfg.model, k) != getattr(default.model, k)]
    if clash:
        asked = ", ".join(f"model.{k}={getattr(cfg.model, k)}" for k in clash)
        has = ", ".join(f"{k}={getattr(init.cfg.model, k)}" for k in clash)
        raise GuitarformerError(f"the config asks for {asked}, but the init run {init.name} has {has}: its weights "
                                "fit only its own architecture",
                                "drop the model options (--config/--set model.*: the architecture comes from the init "
                                "run), or train from scratch without --init")
    out = copy.deepcopy(cfg)
    for k in SHAPE_KEYS:
        setattr(out.model, k, getattr(init.cfg.model, k))
    out.model.vocab_size = 0  # the dataset's (the init run's vocabulary and the tokens the dataset adds)
    for k in TOKEN_KEYS:
        setattr(out.data, k, getattr(init.cfg.data, k))
    out.data.tab_layout = init.cfg.data.tab_layout  # its tokenizer's, for a run saved before the option (migrate)
    for k in MIX_KEYS:
        if getattr(cfg.data, k) == getattr(default.data, k):
            setattr(out.data, k, getattr(init.cfg.data, k))
    out.train.init = init.name
    validate(out)
    return out


def check_tokens(init: Run, tokenizer: miditok.MusicTokenizer, dataset: Path) -> None:
    """Refuse a dataset whose token ids are not the init run's (extended by new tokens only), naming what differs."""
    why = tokens_differ(init.tokenizer, tokenizer)
    if why is not None:
        raise GuitarformerError(
            f"dataset {dataset} is not tokenized like the init run {init.name} ({why})",
            f"prepare your files with its tokens: guitarformer prepare YOUR-FILES --like {init.name} --out "
            f"{dataset}-like, then train --data {dataset}-like")


def _type_of(token: str) -> str:
    return token.split("_", 1)[0]


def new_rows(old: torch.Tensor, init_vocab: dict[str, int], added: list[str]) -> torch.Tensor:
    """Rows (dim 0) for the `added` tokens of a tensor indexed by the init vocabulary: each the mean of the rows of
    the init tokens of its type (CtrlStyle_metal: the mean style), else of all rows."""
    by_type: dict[str, list[int]] = {}
    for token, i in init_vocab.items():
        by_type.setdefault(_type_of(token), []).append(i)
    rows = []
    for token in added:
        ids = by_type.get(_type_of(token)) or list(range(old.shape[0]))
        rows.append(old[ids].float().mean(dim=0))
    return torch.stack(rows).to(old.dtype)


def init_weights(model: torch.nn.Module, init: Run, tokenizer: miditok.MusicTokenizer) -> list[str]:
    """Load the init run's weights into `model` (built for `tokenizer`'s vocabulary, the init one's plus new
    tokens at the end): tensors indexed by the vocabulary get rows for the new tokens (new_rows); the rest must
    match in shape. Returns the added tokens."""
    V_old, V = len(init.tokenizer), len(tokenizer)
    by_id = {i: t for t, i in tokenizer.vocab.items()}
    added = [by_id[i] for i in range(V_old, V)]
    weights = load_checkpoint(init.checkpoint)["model"]
    target = model.state_dict()
    state: dict[str, torch.Tensor] = {}
    for key, new in target.items():
        old = weights.get(key)
        if old is None:
            raise GuitarformerError(f"the init checkpoint {init.checkpoint} has no {key}",
                                    "init from a run of this version's models (a run directory or its ckpt/best.pt)")
        if old.shape != new.shape and V > V_old and old.shape[0] == V_old and old.shape[1:] == new.shape[1:] \
                and new.shape[0] == V:
            old = torch.cat([old, new_rows(old, init.tokenizer.vocab, added)])
        if old.shape != new.shape:
            raise GuitarformerError(f"the init checkpoint's {key} is {tuple(old.shape)}, the model's "
                                    f"{tuple(new.shape)}", "init from a checkpoint that matches its own config")
        state[key] = old.to(new.dtype)  # a shipped model in half precision trains in the run's precision
    model.load_state_dict(state)
    return added
