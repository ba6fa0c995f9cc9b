"""train.time_budget_min: a run that ends within a wall-clock budget, everything counted.

The clock starts when `train()` is called (the dataset's first build aside: preparing the corpus is `prepare`'s
time, not training's), so start-up, compilation, evaluations, in-training samples, checkpoint saves and the final
sample all come out of the budget. After a few timed steps the run fixes max_steps so that the steps left and the
work around them fit; after each evaluation it fixes them again from what that evaluation and the last sample
really took and from the latest step times (the machine may be shared), so the cosine schedule decays to an end
the run reaches. A run that still falls behind (a burst of other work) stops where the work left after it would
pass the budget: `out_of_time`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from guitarformer.config import Config, save_config
from guitarformer.runs.rundir import RunDir, RunState
from guitarformer.runtime import Dist
from guitarformer.training.ranks import min_over_ranks
from guitarformer.training.state import TrainState

# Steps timed for the first fit: after compilation, before the first eval. The median step counts, so a burst of
# other work on a shared machine does not decide the whole run.
BUDGET_TIMED_STEPS = (3, 23)
RECENT_STEPS = 50  # step times a later fit goes by
RIFF_ESTIMATE_S = 15.0  # a sample's time before one is measured (256 tokens on a 2-core CPU, with rendering)
END_RESERVE_S = 5.0  # summary, TensorBoard's hparams, the process's own start and exit around train()


@dataclass
class Costs:
    """Seconds of the work around the steps: one evaluation with its checkpoint saves, one sample, the end."""

    eval_s: float
    riff_s: float = RIFF_ESTIMATE_S
    end_s: float = END_RESERVE_S


def work_after(cfg: Config, step: int, n: int, s_per_step: float, costs: Costs) -> float:
    """Seconds from `step` to the run's end if it trains `n` more steps: the steps, the evaluations on the way and
    at the end (every eval_interval, and the last step), the samples (at evaluations every sample_interval, and one
    at the end), the end itself."""
    t, end = cfg.train, step + n
    evals = end // t.eval_interval - step // t.eval_interval + (1 if end % t.eval_interval else 0)
    riffs = 1  # the final one
    if t.sample_interval:
        every = math.lcm(t.eval_interval, t.sample_interval)  # a sample is drawn at an evaluation
        riffs += end // every - step // every
    return n * s_per_step + evals * costs.eval_s + riffs * costs.riff_s + costs.end_s


def fit_steps_to_budget(cfg: Config, step: int, elapsed_s: float, s_per_step: float, costs: Costs,
                        max_steps: int | None = None) -> int:
    """max_steps that ends the run within cfg.train.time_budget_min, given `elapsed_s` so far (at `step`), the
    seconds per step and the costs around the steps; never above `max_steps` (default: the configured one), never
    below the step reached + 1."""
    t = cfg.train
    left = t.time_budget_min * 60.0 - elapsed_s
    lo, hi = 1, max(1, (max_steps or t.max_steps) - step)  # the largest n whose work fits (at least one more step)
    if work_after(cfg, step, hi, s_per_step, costs) <= left:
        return step + hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if work_after(cfg, step, mid, s_per_step, costs) <= left:
            lo = mid
        else:
            hi = mid - 1
    return step + lo


class Budget:
    """train.time_budget_min for one run (module docstring). Off (every method does nothing) without a budget, and
    on a resumed run, whose max_steps the first run fixed (a resume trains exactly the schedule it was given)."""

    def __init__(self, cfg: Config, dist: Dist, device, run_dir: Path, t_start: float, eval_batches: int,
                 clock: Callable[[], float] = time.time, state: TrainState | None = None):
        self.cfg, self.dist, self.device, self.run_dir = cfg, dist, device, run_dir
        self.t_start, self.eval_batches, self.clock = t_start, eval_batches, clock
        self.state = state  # where the run keeps that the budget has fixed max_steps (checkpoints carry it)
        self.fitted = state is not None and state.budget_fitted
        self.on = cfg.train.time_budget_min > 0 and not self.fitted
        self.max_configured = cfg.train.max_steps  # a later fit may raise max_steps again, never above this
        self.times: list[float] = []  # seconds of each training step since BUDGET_TIMED_STEPS[0]
        self.costs: Costs | None = None

    @property
    def deadline(self) -> float:
        return self.t_start + self.cfg.train.time_budget_min * 60.0

    def step(self, step: int, seconds: float, bar, probe_eval: Callable[[], float]) -> None:
        """Called after each training step (`seconds`: that step's own time). The first fit comes after
        BUDGET_TIMED_STEPS; `probe_eval` times one val batch (the evaluation's cost until one is measured); `bar`
        (tqdm) learns the new total."""
        if not self.on or step < BUDGET_TIMED_STEPS[0]:  # compilation and warm-up are not the step time
            return
        self.times = self.times[-RECENT_STEPS + 1:] + [seconds]
        if self.costs is None and step >= BUDGET_TIMED_STEPS[1]:
            self.costs = Costs(eval_s=probe_eval() * self.eval_batches)
            self._fit(step, bar)

    def after_eval(self, step: int, validate_s: float, save_s: float, bar) -> None:
        """An evaluation took `validate_s` and its checkpoint saves take about `save_s` (the last ones'): fix
        max_steps again, before the checkpoint that carries it is written. The saves and this step's sample (at
        sample_interval) are still to come."""
        if self.costs is None:
            return
        t = self.cfg.train
        self.costs.eval_s = validate_s + save_s
        pending = save_s + (self.costs.riff_s if t.sample_interval and step % t.sample_interval == 0 else 0.0)
        if step < t.max_steps:
            self._fit(step, bar, pending)

    def after_riff(self, riff_s: float) -> None:
        if self.costs is not None:
            self.costs.riff_s = riff_s

    def out_of_time(self, step: int) -> bool:
        """Whether the run must stop now: the final evaluation and sample would end past the budget."""
        if self.costs is None or step >= self.cfg.train.max_steps:
            return False
        return self.clock() + work_after(self.cfg, step, 0, 0.0, self.costs) > self.deadline

    def _fit(self, step: int, bar, pending_s: float = 0.0) -> None:
        t = self.cfg.train
        planned = fit_steps_to_budget(self.cfg, step, self.clock() - self.t_start + pending_s,
                                      statistics.median(self.times), self.costs, self.max_configured)
        first, self.fitted = not self.fitted, True
        t.max_steps = min_over_ranks(planned, self.dist, self.device)
        if self.state is not None:
            self.state.budget_fitted = True
        bar.total = t.max_steps
        if self.dist.main:
            rd = RunDir(self.run_dir)
            save_config(self.cfg, rd.config_path)  # checkpoints carry it too
            rd.write_state(RunState(budget_fitted=True))
            if first:
                print(f"\nguitarformer: {t.time_budget_min:g}-minute budget: {t.max_steps} steps "
                      f"(train.time_budget_min; the schedule decays to step {t.max_steps})", flush=True)
