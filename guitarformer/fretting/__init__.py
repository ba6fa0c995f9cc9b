"""Fretting: a (string, fret) for every note of a part that has no fingering (MIDI, ABC, the built-in corpus).

Strings are numbered as in tab: 1 = highest-pitched string .. len(tuning) = lowest. Fret numbers count
from the capo. `fret()` is a two-pass Viterbi over onsets whose costs (costs.py, weights.json) are fit on
human tabs, helped by a small learned string model (string_model.py); `fret_lowest()` is the baseline.
`finger_score(gs)` fingers a whole GuitarScore (part.py): the call for everything that holds a part.
"""

from guitarformer.fretting.costs import DEFAULT_COSTS, DISTORTED_COSTS, DISTORTED_PROGRAMS, FretCosts, costs_for_program
from guitarformer.fretting.notes import UNPLAYABLE
from guitarformer.fretting.part import finger_score
from guitarformer.fretting.viterbi import fingering_features, fret, fret_lowest, piece_table

__all__ = ["DEFAULT_COSTS", "DISTORTED_COSTS", "DISTORTED_PROGRAMS", "FretCosts", "UNPLAYABLE", "costs_for_program",
           "finger_score", "fingering_features", "fret", "fret_lowest", "piece_table"]
