"""Attention itself and its masks: SDPA, one query written out on a GPU, keys shared by every row, padding and
lower-right causal masks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def key_padding_to_attn_mask(key_mask: Tensor | None) -> Tensor | None:
    """(B, S) bool, True = real token -> (B, 1, 1, S) boolean SDPA mask (True = may attend)."""
    return None if key_mask is None else key_mask[:, None, None, :]


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float = 0.0,
              is_causal: bool = False) -> Tensor:
    """SDPA, except one query per row on a GPU or inside a compiled step: there it is written out (two batched
    matrix-vector products and a softmax in fp32). SDPA sends one query with a mask to its memory-efficient
    kernel, whose tiles of 64 queries leave most of the GPU idle: most of a large decoder's decoding step at batch 1
    went there (`benchmarks/gpu_profile_step.py`, docs/results/BENCH_GPU.md). In a step compiled on a CPU
    (generation/decode/compiled.py), inductor fuses the written-out attention into one C++ kernel, quicker than SDPA's call;
    eager on a CPU, SDPA stays (the written-out ops, each its own call, are slower there)."""
    if q.shape[2] != 1 or not (q.is_cuda or torch.compiler.is_compiling()) or dropout_p or is_causal:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
    return one_query_attention(q, k, v, mask)


def one_query_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """Attention of (B, nh, 1, hs) queries written out; `mask`: bool, True = may attend, broadcast to (B, nh, 1, L)."""
    att = torch.matmul(q, k.transpose(-2, -1)).float() * q.shape[-1] ** -0.5  # (B, nh, 1, L)
    if mask is not None:
        att = att.masked_fill(~mask, float("-inf"))
    return torch.matmul(att.softmax(-1).to(v.dtype), v)  # (B, nh, 1, hs)


def shared_prefix_attention(q: Tensor, kp: Tensor, vp: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Attention of (B, nh, T, hs) queries over keys every row shares, `kp`/`vp` (1, nh, P, hs), then the row's own
    `k`/`v` (B, nh, L, hs), whose last T are the queries' own positions (causal among them). The shared keys are read
    once for all B rows, as one product of the B * T queries against them: B rows decoding after one long prompt (the
    candidate fills of `infill`) read P keys a layer a step, not B * P, which at 8 rows after ~900 prompt tokens is
    what a step spends its time on (the cache outgrows the CPU's caches). Scores in fp32, as one_query_attention."""
    B, nh, T, hs = q.shape
    P, L = kp.shape[2], k.shape[2]
    rows = q.permute(1, 0, 2, 3).reshape(1, nh, B * T, hs)  # every row's queries against the shared keys at once
    shared = torch.matmul(rows, kp.transpose(-2, -1)).view(nh, B, T, P).permute(1, 0, 2, 3)  # (B, nh, T, P)
    own = torch.matmul(q, k.transpose(-2, -1))  # (B, nh, T, L)
    if T > 1:
        own = own.masked_fill(~lower_right_causal_mask(T, L, q.device), float("-inf"))
    att = (torch.cat([shared, own], -1).float() * hs ** -0.5).softmax(-1).to(v.dtype)  # (B, nh, T, P + L)
    from_shared = torch.matmul(att[..., :P].permute(1, 0, 2, 3).reshape(1, nh, B * T, P), vp)  # (1, nh, B * T, hs)
    return from_shared.view(nh, B, T, hs).permute(1, 0, 2, 3) + torch.matmul(att[..., P:], v)


def lower_right_causal_mask(T: int, L: int, device: torch.device) -> Tensor:
    """(T, L) bool: query i (the i-th of the T newest positions) may see keys 0 .. L-T+i.

    SDPA's is_causal=True aligns the triangle top-left (query i sees keys 0..i), which is wrong when
    queries are the last T of L positions, as in a cached decoding step.
    """
    return torch.ones(T, L, dtype=torch.bool, device=device).tril(diagonal=L - T)
