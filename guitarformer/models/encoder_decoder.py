"""Encoder-decoder Transformer (source bars -> continuation bars) with a cross-attention-aware KV cache.

Shapes: B batch, S source tokens, T target tokens, C width, V vocabulary (the legend is in layers.py).
"""

from __future__ import annotations

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


class EncoderDecoder(LanguageModel):
    """Bidirectional pre-norm encoder over the source, causal decoder with cross-attention over its memory.

    Source and target come from one tokenizer, so one token embedding serves both sides (and the LM head
    when tied); each side has its own absolute positions.
    """

    def __init__(self, config: ModelConfig | dict) -> None:
        super().__init__()
        cfg = as_model_config(config)
        if cfg.vocab_size <= 0:
            raise ValueError("model.vocab_size must be set (> 0) before building the model")
        self.config = cfg
        C = cfg.n_embd
        self.n_enc_layer = cfg.n_enc_layer or cfg.n_layer
        wte = nn.Embedding(cfg.vocab_size, C)
        self.src_embed = TokenEmbedding(wte, cfg.pos, cfg.src_block_size, cfg.dropout)
        self.tgt_embed = TokenEmbedding(wte, cfg.pos, cfg.block_size, cfg.dropout)
        max_len = max(cfg.src_block_size, cfg.block_size)
        self.rotary = RotaryEmbedding(C // cfg.n_head, max_len) if cfg.pos == "rope" else None
        self.encoder = nn.ModuleList(Block(cfg, causal=False, cross=False) for _ in range(self.n_enc_layer))
        self.ln_enc = nn.LayerNorm(C, bias=cfg.bias)
        self.decoder = nn.ModuleList(Block(cfg, causal=True, cross=True) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(C, bias=cfg.bias)
        self.lm_head = nn.Linear(C, cfg.vocab_size, bias=False)
        init_gpt2_(self, n_residual=1)  # embeddings and plain linears; residual scaling per stack below
        init_gpt2_(self.encoder, n_residual=2 * self.n_enc_layer)  # attention + FFN per block
        init_gpt2_(self.decoder, n_residual=3 * cfg.n_layer)  # self-, cross-attention + FFN per block
        if cfg.tie_weights:
            self.lm_head.weight = wte.weight
        self.copy = CopyHead(C) if cfg.copy else None  # config.copy: from the source and the target so far
        if self.copy is not None:
            self.copy.reset_parameters()

    # ------------------------------------------------------------------ inference pieces

    def encode(self, src: Tensor, src_key_mask: Tensor | None = None) -> Tensor:
        """src (B, S) -> memory (B, S, C). Padded positions (mask False) are never attended to."""
        S = src.shape[1]
        x = self.src_embed(src)  # (B, S, C)
        rope = self.rotary(0, S) if self.rotary is not None else None
        for block in self.encoder:
            x = block(x, key_mask=src_key_mask, rope=rope)
        return layer_norm(x, self.ln_enc)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        src_key_mask: Tensor | None = None,
        cache: KVCache | None = None,
        src: Tensor | None = None,
    ) -> Tensor:
        """tgt (B, T) -> logits (B, T, V). With a cache, tgt holds only the new tokens; the memory's
        cross-attention K/V are projected on the first call and reused (memory may then be None).
        `src` (B, S): the source tokens, which model.copy matches against (every call: a window may restart)."""
        T = tgt.shape[1]
        matched = None
        if self.copy is not None:
            if src is None:
                raise ValueError("model.copy: decode needs the source tokens (src=) to copy from")
            matched = match(tgt, cache, src)
        start = cache.positions(T) if cache is not None else 0  # an int, or (T,) / (B, T) positions (see KVCache)
        x = self.tgt_embed(tgt, start)  # (B, T, C)
        rope = self.rotary(start, T) if self.rotary is not None else None
        for i, block in enumerate(self.decoder):
            x = block(x, memory=memory, memory_mask=src_key_mask, rope=rope, cache=cache, layer=i)
        if cache is not None:
            cache.advance(T)
        h = layer_norm(x, self.ln_f)
        logits = linear(h, self.lm_head)  # (B, T, V)
        return logits if matched is None else self.copy(logits, h, *matched)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        targets: Tensor | None = None,
        src_key_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """src (B, S), tgt (B, T) -> logits (B, T, V), mean cross-entropy against targets (B, T) or None."""
        memory = self.encode(src, src_key_mask)
        logits = self.decode(tgt, memory, src_key_mask, src=src)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)  # (B*T, V)
        return logits, loss

    # ------------------------------------------------------------------ accounting

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count; non_embedding drops position tables (and an untied token embedding), as Decoder."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            if self.config.pos == "learned":
                n -= self.src_embed.wpe.weight.numel() + self.tgt_embed.wpe.weight.numel()
            if not self.config.tie_weights:
                n -= self.src_embed.wte.weight.numel()
        return n

    def flops_per_token(self, src_len: int | None = None, tgt_len: int | None = None) -> float:
        """Training FLOPs per TARGET token (one example = S source + T target tokens), PaLM-style:
        6 x (matmul params x the tokens they touch) + 12 x C x (attention score/value pairs), over T."""
        cfg = self.config
        S, T, C = src_len or cfg.src_block_size, tgt_len or cfg.block_size, cfg.n_embd
        n_enc = sum(p.numel() for p in self.encoder.parameters()) + sum(p.numel() for p in self.ln_enc.parameters())
        n_kv = sum(b.cross.kv_proj.weight.numel() for b in self.decoder)  # applied to the S memory tokens
        n_dec = self.num_params(non_embedding=True) - n_enc - n_kv
        matmul = 6.0 * (n_enc * S + n_kv * S + n_dec * T)
        attn = 12.0 * C * (self.n_enc_layer * S * S + cfg.n_layer * (T * T + T * S))
        return (matmul + attn) / T
