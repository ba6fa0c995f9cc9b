"""training/micro_batch.py: the micro-batch a GPU holds, with gradient accumulation keeping the tokens per step."""

from __future__ import annotations

import pytest
import torch

from guitarformer.training.micro_batch import cuda_fits, fit_on_gpu, micro_batches


def test_batch_is_halved_and_accumulation_doubled_until_it_fits():
    tried = []

    def fits(b: int) -> bool:
        tried.append(b)
        return b <= 8

    assert micro_batches(32, 1, fits) == (8, 4)
    assert tried == [32, 16, 8]
    assert micro_batches(32, 2, lambda b: True) == (32, 2)  # fits as asked: untouched
    assert micro_batches(12, 1, lambda b: False) == (3, 4)  # an odd batch cannot be halved exactly: stop there
    assert micro_batches(1, 3, lambda b: False) == (1, 3)


def test_out_of_memory_means_does_not_fit_and_other_errors_are_raised():
    def oom(b: int) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    def bad(b: int) -> None:
        raise ValueError("a real bug")

    assert cuda_fits(oom)(4) is False
    with pytest.raises(ValueError, match="real bug"):
        cuda_fits(bad)(4)


def test_off_the_gpu_the_batch_is_as_asked():
    assert fit_on_gpu(torch.nn.Linear(2, 2), None, "decoder", 16, 1, torch.device("cpu"), torch.float32) == (16, 1)
