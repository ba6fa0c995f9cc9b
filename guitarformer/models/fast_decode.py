"""One-token decoding step without module calls, for sampling with a KV cache.

At one new token per step the model's matmuls are matrix-vector products of ~10 µs each on a CPU, so what
surrounds them counts: ~60 nn.Module calls, view/transpose churn and separate residual adds. `DecodeStep`
walks the same parameters with functional ops only:

- weights are read through a pre-transposed (in, out) copy on CPU: a row-vector times a row-major
  matrix is the BLAS layout that runs fastest there (~15% per product); elsewhere a transposed view;
- residual adds are folded into the matmul (`addmm(x, y, W)`), biases added in the same call;
- queries/keys are rotated for one position only, the cache is written in place.

It computes the same function as `model(tokens, cache=cache)` / `model.decode(...)` for one token (same
math, different summation order: agreement to ~1e-6 in fp32, tested in tests/test_models.py). It is
built from the weights as they are when constructed: build a new one after the weights change.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from guitarformer.models.layers import Block, KVCache, TokenEmbedding, apply_rope


def _mat(linear: nn.Linear) -> Tensor:
    """(in, out) weight for `x @ W`: a contiguous copy on CPU, a free transposed view elsewhere."""
    w = linear.weight.detach()
    return w.t().contiguous() if w.device.type == "cpu" else w.t()


def _bias(m: nn.Module) -> Tensor | None:
    b = getattr(m, "bias", None)
    return None if b is None else b.detach()


def _mm(x: Tensor, w: Tensor, b: Tensor | None, residual: Tensor | None = None) -> Tensor:
    """residual + x @ w + b, in as few calls as the dtypes allow (x (B, in), w (in, out))."""
    if residual is None:
        return x @ w if b is None else torch.addmm(b, x, w)
    if residual.dtype == w.dtype and not torch.is_autocast_enabled(x.device.type):
        out = torch.addmm(residual, x, w)  # residual stream stays in its own dtype
    else:  # autocast or mixed dtypes: keep the residual's precision as the module path does
        out = residual + x @ w
    return out if b is None else out.add_(b)


class _Layer:
    """One block's parameters in decoding order."""

    def __init__(self, blk: Block) -> None:
        a, f = blk.attn, blk.mlp
        self.ln1 = (blk.ln_1.weight.detach(), _bias(blk.ln_1))
        self.qkv, self.qkv_b = _mat(a.c_attn), _bias(a.c_attn)
        self.proj, self.proj_b = _mat(a.c_proj), _bias(a.c_proj)
        self.cross = None
        if blk.cross is not None:
            assert blk.ln_x is not None
            c = blk.cross
            self.cross = ((blk.ln_x.weight.detach(), _bias(blk.ln_x)), _mat(c.q_proj), _bias(c.q_proj),
                          _mat(c.c_proj), _bias(c.c_proj))
        self.ln2 = (blk.ln_2.weight.detach(), _bias(blk.ln_2))
        self.fc, self.fc_b = _mat(f.c_fc), _bias(f.c_fc)
        self.fc2, self.fc2_b = _mat(f.c_proj), _bias(f.c_proj)
        self.swiglu = f.swiglu


class DecodeStep:
    """`step(tokens (B,), cache, memory_mask=None) -> logits (B, V)` for a Decoder or an EncoderDecoder's
    decoder side; advances the cache by one position. Eval only (no dropout)."""

    def __init__(self, model: nn.Module) -> None:
        cfg = model.config
        self.n_head, self.C = cfg.n_head, cfg.n_embd
        self.hs = self.C // self.n_head
        is_encdec = hasattr(model, "decoder")
        embed: TokenEmbedding = model.tgt_embed if is_encdec else model.embed
        self.wte = embed.wte.weight.detach()
        self.pos, self.max_len = embed.pos, embed.max_len
        self.wpe = embed.wpe.weight.detach() if embed.pos == "learned" else getattr(embed, "table", None)
        self.rotary = model.rotary
        blocks = model.decoder if is_encdec else model.blocks
        self.layers = [_Layer(b) for b in blocks]
        self.ln_f = (model.ln_f.weight.detach(), _bias(model.ln_f))
        self.head = _mat(model.lm_head)

    def _ln(self, x: Tensor, wb: tuple[Tensor, Tensor | None]) -> Tensor:
        return F.layer_norm(x, (self.C,), wb[0], wb[1])

    def __call__(self, tokens: Tensor, cache: KVCache, memory_mask: Tensor | None = None) -> Tensor:
        pos = cache.length
        if pos >= self.max_len:
            raise ValueError(f"position {pos} is past the model's context of {self.max_len} tokens")
        B, nh, hs = tokens.shape[0], self.n_head, self.hs
        x = self.wte[tokens]  # (B, C)
        if self.wpe is not None:
            x = x + self.wpe[pos].to(x.dtype)
        rope = self.rotary(pos, 1) if self.rotary is not None else None  # (1, 1, 1, hs/2) each
        attn_mask = None if memory_mask is None else memory_mask[:, None, None, :]  # (B, 1, 1, S)
        for i, L in enumerate(self.layers):
            qkv = _mm(self._ln(x, L.ln1), L.qkv, L.qkv_b).view(B, 1, 3, nh, hs)  # (B, 1, 3, nh, hs)
            qk = qkv[:, :, :2]
            if rope is not None:
                qk = apply_rope(qk, rope)
            q = qk[:, 0, 0].unsqueeze(2)  # (B, nh, 1, hs)
            k, v = cache.update(i, qk[:, 0, 1].unsqueeze(2), qkv[:, 0, 2].unsqueeze(2))  # (B, nh, pos+1, hs)
            y = F.scaled_dot_product_attention(q, k, v)  # one query sees every cached key: no mask
            x = _mm(y.view(B, self.C), L.proj, L.proj_b, x)
            if L.cross is not None:
                ln, wq, bq, wo, bo = L.cross
                if cache.cross[i] is None:
                    raise ValueError("the cache holds no cross-attention keys yet: run the first step through the model")
                ck, cv = cache.cross[i]  # (B, nh, S, hs)
                q = _mm(self._ln(x, ln), wq, bq).view(B, nh, 1, hs)
                y = F.scaled_dot_product_attention(q, ck, cv, attn_mask=attn_mask)
                x = _mm(y.view(B, self.C), wo, bo, x)
            h = _mm(self._ln(x, L.ln2), L.fc, L.fc_b)
            if L.swiglu:
                gate, up = h.chunk(2, dim=-1)
                h = F.silu(gate) * up
            else:
                h = F.gelu(h)
            x = _mm(h, L.fc2, L.fc2_b, x)
        cache.advance(1)
        return self._ln(x, self.ln_f) @ self.head  # (B, V)
