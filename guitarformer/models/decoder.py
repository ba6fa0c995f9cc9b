"""Decoder-only causal Transformer language model (GPT style), with a KV cache for sampling.

Shapes: B batch, T tokens, C width, V vocabulary (the legend is in layers.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from guitarformer import IGNORE_INDEX
from guitarformer.config import ModelConfig
from guitarformer.models.copy import CopyHead, match
from guitarformer.models.layers import (
    Block,
    KVCache,
    LanguageModel,
    RotaryEmbedding,
    TokenEmbedding,
    as_model_config,
    init_gpt2_,
)
from guitarformer.models.ops import layer_norm, linear


PAD_ID = 0  # miditok's PAD: never a real token before another, so its `prev` row means "no token before"


class Decoder(LanguageModel):
    """Token + position embedding, n_layer causal pre-norm blocks, final LayerNorm, (tied) LM head."""

    def __init__(self, config: ModelConfig | dict) -> None:
        super().__init__()
        cfg = as_model_config(config)
        if cfg.vocab_size <= 0:
            raise ValueError("model.vocab_size must be set (> 0) before building the model")
        self.config = cfg
        C = cfg.n_embd
        self.embed = TokenEmbedding(nn.Embedding(cfg.vocab_size, C), cfg.pos, cfg.block_size, cfg.dropout)
        # The token before each position (config.prev_token); row PAD_ID stands for "none" at a window's start.
        self.prev = nn.Embedding(cfg.vocab_size, C) if cfg.prev_token else None
        self.rotary = RotaryEmbedding(C // cfg.n_head, cfg.block_size) if cfg.pos == "rope" else None
        self.blocks = nn.ModuleList(Block(cfg, causal=True, cross=False) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(C, bias=cfg.bias)
        self.lm_head = nn.Linear(C, cfg.vocab_size, bias=False)
        self.copy = CopyHead(C) if cfg.copy else None  # config.copy: models/copy.py
        init_gpt2_(self, n_residual=2 * cfg.n_layer)  # two residual branches per block
        if self.copy is not None:
            self.copy.reset_parameters()
        if cfg.tie_weights:
            self.lm_head.weight = self.embed.wte.weight  # after init: one tensor, embedding's N(0, 0.02)

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) -> logits (B, T, V), mean cross-entropy against targets (B, T) or None. With model.copy the
        "logits" are log-probabilities of the mixture (models/copy.py), which every reader of logits takes as they are.

        With a cache, idx holds only the new tokens; their positions start at cache.length and the
        cache is advanced by T in place.
        """
        T = idx.shape[1]
        matched = match(idx, cache) if self.copy is not None else None
        start = cache.positions(T) if cache is not None else 0  # an int, or (T,) / (B, T) positions (see KVCache)
        x = self.embed(idx, start)  # (B, T, C); raises past block_size
        if self.prev is not None:
            x = x + F.embedding(self._previous(idx, cache), self.prev.weight)
        rope = self.rotary(start, T) if self.rotary is not None else None
        for i, block in enumerate(self.blocks):
            x = block(x, rope=rope, cache=cache, layer=i)
        h = layer_norm(x, self.ln_f)
        logits = linear(h, self.lm_head)  # (B, T, V)
        if matched is not None:
            logits = self.copy(logits, h, *matched)
        if cache is not None:
            cache.advance(T)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)  # (B*T, V)
        return logits, loss

    @staticmethod
    def _previous(idx: Tensor, cache: KVCache | None) -> Tensor:
        """(B, T) the token before each of idx's: the cache's last token where it holds some (kept there for the next
        call, in place for a static cache), else PAD_ID, as a training window's first position sees."""
        if cache is not None and cache.length > 0 and cache.last is not None:
            first = cache.last
        else:
            first = torch.full_like(idx[:, :1], PAD_ID)
        prev = torch.cat([first, idx[:, :-1]], 1)  # before keep_last, which may overwrite `first` in place
        if cache is not None:
            cache.keep_last(idx[:, -1:])
        return prev

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count. non_embedding drops the lookup-only tables (position embedding, and the token
        embedding when it is not tied, the previous-token table); a tied token embedding stays, as it is also the LM
        head's matmul."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            if self.prev is not None:
                n -= self.prev.weight.numel()
            if self.copy is not None:
                n -= self.copy.by_length.weight.numel()
            if self.config.pos == "learned":
                n -= self.embed.wpe.weight.numel()
            if not self.config.tie_weights:
                n -= self.embed.wte.weight.numel()
        return n

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token (forward + backward), PaLM appendix B: 6N + 12 * n_layer * C * T."""
        cfg = self.config
        T = seq_len or cfg.block_size
        return 6.0 * self.num_params(non_embedding=True) + 12.0 * cfg.n_layer * cfg.n_embd * T
