"""runtime.py: the one place that picks CPU thread counts (issue 28: never slower than one thread on a busy machine)."""

from __future__ import annotations

import pytest
import torch

from guitarformer.errors import GuitarformerError
from guitarformer.runtime import (
    SMALL_STEP_WORK,
    CpuLoad,
    cpu_load,
    default_threads,
    resolve_threads,
    set_threads,
    step_work,
    threads,
)

BIG = SMALL_STEP_WORK * 10


def test_small_steps_get_one_thread_whatever_the_machine():
    assert default_threads(SMALL_STEP_WORK, CpuLoad(16, 0.0)) == 1
    assert default_threads(1_000, CpuLoad(2, 0.0)) == 1


def test_big_steps_get_the_idle_cores():
    assert default_threads(BIG, CpuLoad(2, 0.0)) == 2
    assert default_threads(BIG, CpuLoad(2, 1.0)) == 1  # the 2-core machine with one core held (issue 28)
    assert default_threads(BIG, CpuLoad(8, 3.2)) == 5
    assert default_threads(BIG, CpuLoad(2, 7.0)) == 1  # overloaded: still one, never zero
    assert default_threads(BIG, CpuLoad(4, 0.4)) == 4
    assert default_threads(BIG, CpuLoad(8, 0.0), processes=2) == 4  # two DDP ranks share the machine
    assert default_threads(BIG, CpuLoad(2, 1.0), processes=2) == 1


def test_an_explicit_count_wins_then_omp_num_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert resolve_threads(3, 1_000, CpuLoad(2, 0.0)) == 3
    assert resolve_threads(0, BIG, CpuLoad(2, 0.0)) == 2
    assert resolve_threads(None, BIG, CpuLoad(2, 0.0)) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert resolve_threads(0, BIG, CpuLoad(2, 0.0)) == 1
    assert resolve_threads(2, BIG, CpuLoad(2, 0.0)) == 2
    with pytest.raises(GuitarformerError, match="negative"):
        resolve_threads(-1, BIG)


def test_cpu_load_reads_this_machine():
    load = cpu_load()
    assert load.cores >= 1 and load.load >= 0.0 and 1 <= load.idle_cores <= load.cores


def test_set_threads_and_the_threads_block_restore(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        assert set_threads(0, 10, CpuLoad(2, 0.0)) == 1 and torch.get_num_threads() == 1
        with threads(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_step_work_is_parameters_times_rows():
    model = torch.nn.Linear(10, 10)  # 110 parameters
    assert step_work(model, 4) == 440 and step_work(model, 0) == 110
