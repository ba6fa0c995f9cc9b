"""The largest micro-batch a GPU holds, with gradient accumulation making up the rest: a run keeps the tokens per
optimizer step its config asks for (decoder-base: 32 x 1024) on a GPU too small to hold them in one pass."""

from __future__ import annotations

from collections.abc import Callable

import torch

from guitarformer.models.kinds import kind_of
from guitarformer.runtime import autocast_ctx


def micro_batches(batch_size: int, grad_accum: int, fits: Callable[[int], bool]) -> tuple[int, int]:
    """(batch_size, grad_accum) with the same product: the batch halved, the accumulation doubled, until `fits(b)`
    (one forward and backward of b rows runs) holds or the batch is one row (then as asked: the real step's error
    says what is wrong). Halving keeps the product exact for a batch that is a power of two times an odd number
    while it stays even."""
    b, a = batch_size, grad_accum
    while b > 1 and b % 2 == 0 and not fits(b):
        b, a = b // 2, a * 2
    return b, a


def cuda_fits(step: Callable[[int], None]) -> Callable[[int], bool]:
    """`fits(b)` for `micro_batches` from a probe `step(b)` (one forward and backward of b rows): False where CUDA
    runs out of memory, with the probe's memory given back."""

    def fits(b: int) -> bool:
        try:
            step(b)
            return True
        except torch.cuda.OutOfMemoryError:
            return False
        finally:
            torch.cuda.empty_cache()

    return fits


def fit_on_gpu(raw: torch.nn.Module, data, kind: str, batch_size: int, grad_accum: int, device: torch.device,
               dtype: torch.dtype) -> tuple[int, int]:
    """`micro_batches` for the model on this GPU, probed with eager forward and backward passes of real training
    windows (eager holds at least what the compiled step holds). The probes draw from their own generator: the
    run's data order and dropout stream are left alone. Elsewhere (CPU memory is not the limit) as asked."""
    if device.type != "cuda":
        return batch_size, grad_accum
    api = kind_of(kind)

    def step(b: int) -> None:
        inputs = api.inputs(data.train.batch(b, torch.Generator().manual_seed(0))).to(device)
        with torch.random.fork_rng(devices=[device]):
            try:
                with autocast_ctx(device, dtype):
                    _, loss = inputs(raw)
                loss.backward()
            finally:
                raw.zero_grad(set_to_none=True)

    return micro_batches(batch_size, grad_accum, cuda_fits(step))
