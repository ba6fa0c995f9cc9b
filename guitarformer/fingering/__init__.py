"""Fingering: a (string, fret) for every note of a part, and how well a fingering agrees with a human one.

Strings are numbered as in tab: 1 = highest-pitched string .. len(tuning) = lowest. Fret numbers count from the
capo. Which call for what:

- `finger_score(gs)` (part.py): a whole GuitarScore fingered by `fret()`; the call for everything that holds a part
  without one (MIDI, ABC, the built-in corpus, a decoded riff, a rendered tab).
- `fret(pitches, ...)` (viterbi.py): the two-pass Viterbi over onsets whose costs (costs.py, weights.json) are fit
  on human tabs, helped by a small learned string model (string_model.py, string_model.pt) and chord shapes
  (chords.py); `fret_lowest()` is the baseline, `FretCosts`/`costs_for_program` the costs a part's program uses.
- `finger(model, tokenizer, scores)` (tab_model.py): a tab-token model chooses every note's string (beam search over
  its own tokens under the generation constraint; layout 3's search in tab_implied.py, the shared row machinery in
  tab_rows.py); `refinger` the same over token ids, `check_fingering_run` whether a run can do it.
- `finger_combined(model, tokenizer, scores)` (combined.py): `fret()`'s costs plus the tab model's -log p(string).
- `evaluate_folder`, `score_parts`, `compare_part`, `format_report` (agreement.py): how often a fingering agrees
  with human tabs (`guitarformer eval --fingering`).

`fret()` and `finger_score()` load numpy only (torch where fret() runs the string model); the model's fingering and
the agreement metrics load torch and the tokenizers, so they are imported on first use, as the package root does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guitarformer import lazy_names
from guitarformer.fingering.costs import DEFAULT_COSTS, DISTORTED_COSTS, DISTORTED_PROGRAMS, FretCosts, costs_for_program
from guitarformer.fingering.notes import UNPLAYABLE
from guitarformer.fingering.part import finger_score
from guitarformer.fingering.viterbi import fingering_features, fret, fret_lowest, piece_table

_API = {
    "BEAM": "guitarformer.fingering.tab_model",
    "Fingered": "guitarformer.fingering.tab_model",
    "check_fingering_run": "guitarformer.fingering.tab_model",
    "finger": "guitarformer.fingering.tab_model",
    "refinger": "guitarformer.fingering.tab_model",
    "log_likelihood": "guitarformer.fingering.tab_model",
    "MODEL_WEIGHT": "guitarformer.fingering.combined",
    "finger_combined": "guitarformer.fingering.combined",
    "string_logprobs": "guitarformer.fingering.combined",
    "Agreement": "guitarformer.fingering.agreement",
    "compare_part": "guitarformer.fingering.agreement",
    "evaluate_folder": "guitarformer.fingering.agreement",
    "format_report": "guitarformer.fingering.agreement",
    "part_ids": "guitarformer.fingering.agreement",
    "score_parts": "guitarformer.fingering.agreement",
}

__all__ = sorted([*_API, "DEFAULT_COSTS", "DISTORTED_COSTS", "DISTORTED_PROGRAMS", "FretCosts", "UNPLAYABLE",
                  "costs_for_program", "finger_score", "fingering_features", "fret", "fret_lowest", "piece_table"])

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from guitarformer.fingering.agreement import (Agreement, compare_part, evaluate_folder, format_report, part_ids,
                                                  score_parts)
    from guitarformer.fingering.combined import MODEL_WEIGHT, finger_combined, string_logprobs
    from guitarformer.fingering.tab_model import BEAM, Fingered, check_fingering_run, finger, log_likelihood, refinger

__getattr__ = lazy_names(__name__, _API, globals())


def __dir__() -> list[str]:
    return __all__
