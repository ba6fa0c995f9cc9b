"""train.time_budget_min: a run that ends within a wall-clock budget, by fixing max_steps from measured steps."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from guitarformer.config import Config, save_config
from guitarformer.runtime import Dist
from guitarformer.training.ranks import min_over_ranks

# Steps timed for train.time_budget_min: after compilation, before the first eval. The median step counts, so a
# burst of other work on a shared machine does not decide the whole run.
BUDGET_TIMED_STEPS = (3, 23)
BUDGET_EVAL_STEPS_PER_TOKEN = 1 / 3  # an eval token costs about a third of a training token (forward only)


def fit_steps_to_budget(cfg: Config, step: int, elapsed_s: float, s_per_step: float, val_tokens: int,
                        tokens_per_step: int) -> int:
    """max_steps that ends the run within cfg.train.time_budget_min, given `elapsed_s` so far (at `step`) and the
    measured seconds per step; never above the configured max_steps, never below the step reached."""
    t = cfg.train
    left = t.time_budget_min * 60.0 - elapsed_s
    eval_steps = val_tokens * BUDGET_EVAL_STEPS_PER_TOKEN / max(1, tokens_per_step) if t.eval_iters == 0 \
        else t.eval_iters * BUDGET_EVAL_STEPS_PER_TOKEN
    per_step = s_per_step * (1 + eval_steps / max(1, t.eval_interval))  # evals spread over the steps
    return max(step + 1, min(t.max_steps, step + int(left / per_step)))


class Budget:
    """train.time_budget_min: times steps BUDGET_TIMED_STEPS once, then fixes max_steps to end in time."""

    def __init__(self, cfg: Config, dist: Dist, device, run_dir: Path, val_tokens: int, tokens_per_step: int,
                 t_start: float):
        self.cfg, self.dist, self.device, self.run_dir = cfg, dist, device, run_dir
        self.val_tokens, self.tokens_per_step, self.t_start = val_tokens, tokens_per_step, t_start
        self.ends: list[float] = []

    def step(self, step: int, bar) -> None:
        """Called after each step; `bar` (tqdm) learns the new total when max_steps is fixed."""
        t = self.cfg.train
        if not (t.time_budget_min > 0 and not t.budget_fitted and BUDGET_TIMED_STEPS[0] <= step <= BUDGET_TIMED_STEPS[1]):
            return
        self.ends.append(time.time())
        if step < BUDGET_TIMED_STEPS[1]:
            return
        # fix max_steps once; checkpoints and config.yaml carry it
        planned = fit_steps_to_budget(self.cfg, step, time.time() - self.t_start,
                                      statistics.median(b - a for a, b in zip(self.ends, self.ends[1:])),
                                      self.val_tokens, self.tokens_per_step)
        t.max_steps, t.budget_fitted = min_over_ranks(planned, self.dist, self.device), True
        bar.total = t.max_steps
        if self.dist.main:
            save_config(self.cfg, self.run_dir / "config.yaml")
            print(f"\nguitarformer: {t.time_budget_min:g}-minute budget: {t.max_steps} steps "
                  f"(train.time_budget_min; the schedule decays to step {t.max_steps})", flush=True)
