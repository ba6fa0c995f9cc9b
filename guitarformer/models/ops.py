"""Leaf layers without module calls: the per-op helpers the blocks (models/layers.py) call their Linear and LayerNorm
parameters through, and what a decoding step, eager or compiled, needs of them on a CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


# At one token per decoding step a matrix product costs a few µs, and so does the nn.Module call around it
# (hooks, attribute lookups, a Python frame): the blocks call their Linear and LayerNorm parameters
# through these functions. The parameters stay in nn.Linear / nn.LayerNorm modules (init, state_dict).

FEW_ROWS = 64  # a product with at most this many rows (a decoding step) reads a transposed weight on CPU


compiling = torch.compiler.is_compiling  # a compiled step (generation/decode/compiled.py) lets the compiler pick layouts


def transposed(m: nn.Linear) -> Tensor:
    """m's weight as an (in, out) copy, made again where the weight changed since (its version or its storage: an
    optimizer step, load_state_dict, a move or cast; a change made through `.data` would go unseen). It stays with the
    module, a plain attribute (not a parameter, not in the state_dict): one more copy of the weights in CPU memory."""
    w = m.weight
    made_of = (w._version, w.data_ptr())
    if m.__dict__.get("_weight_t_of") != made_of:
        m.__dict__["_weight_t"] = w.detach().t().contiguous()
        m.__dict__["_weight_t_of"] = made_of
    return m.__dict__["_weight_t"]


def hold_transposed(model: nn.Module) -> None:
    """Every Linear's (in, out) copy brought up to date, for a compiled step, which reads them as they are."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            transposed(m)


def linear(x: Tensor, m: nn.Linear) -> Tensor:
    """m(x) for x (..., in) -> (..., out), without the module call.

    A product of few rows on CPU without autograd (a decoding step) reads an (in, out) copy of the weight
    (`transposed`): a row vector times a row-major matrix is the layout CPU BLAS runs fastest
    (docs/results/BENCH_SAMPLE.md). A compiled step reads the copy without checking it
    (`hold_transposed` made it before: generation/decode/compiled.py). Anything else is F.linear on the weight itself.
    """
    if x.is_cpu and not torch.is_grad_enabled() and x.numel() <= FEW_ROWS * m.in_features:
        w_t = getattr(m, "_weight_t", None) if compiling() else transposed(m)
        if w_t is not None:
            y = torch.matmul(x, w_t)  # (..., out)
            return y if m.bias is None else y.add_(m.bias)
    return F.linear(x, m.weight, m.bias)


def as_rows(fn, x: Tensor) -> Tensor:
    """fn(x) for an op on the last dimension (a norm, an activation), computed over x as rows (N, C) inside a compiled
    step: inductor then writes the result as a (N, C) buffer the next product reads as it is. Over (B, T, C) it writes
    a (1, 1, C) buffer and hands the product a (1, C) view of it with a 0 stride on the row, which ATen's CPU mm
    copies before every call (3 copies a layer). Eager: fn(x), no views."""
    return fn(x.flatten(0, -2)).view(*x.shape[:-1], -1) if compiling() else fn(x)


def layer_norm(x: Tensor, m: nn.LayerNorm) -> Tensor:
    """m(x) without the module call (nor F.layer_norm's Python wrapper: a few µs per call on a slow CPU)."""
    if compiling():
        return as_rows(lambda r: torch.layer_norm(r, m.normalized_shape, m.weight, m.bias, m.eps), x)
    return torch.layer_norm(x, m.normalized_shape, m.weight, m.bias, m.eps)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """F.dropout, skipped outright in eval or at p=0 (a decoding step makes ~20 such calls per token)."""
    return F.dropout(x, p, True) if training and p > 0 else x
