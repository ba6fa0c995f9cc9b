"""benchmarks/bench_string_rules.py: the hand-in-the-bar rule it measures against layout 3's lowest-fret string."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from guitarformer.vocab.tab_tokens import lowest_fret_string
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_string_rules.py"


def _script():
    spec = importlib.util.spec_from_file_location("bench_string_rules", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hand_rule_follows_the_hand_and_starts_each_bar_at_the_lowest_fret():
    rules = _script()
    E4 = 64  # open high E (string 1), B string fret 5, G string fret 9
    assert lowest_fret_string(STANDARD_TUNING, 0, E4) == 1
    assert rules.hand_string(E4, [], STANDARD_TUNING, 0) == 1  # a bar's first note: the lowest fret, as layout 3
    assert rules.hand_string(E4, [2, 3], STANDARD_TUNING, 0) == 1  # a low hand plays the open string
    assert rules.hand_string(E4, [7, 9], STANDARD_TUNING, 0) == 3  # hand at 8: fret 9 on G, not fret 5 on B
    assert rules.hand_string(E4, [12, 0, 6, 8], STANDARD_TUNING, 0) == 2  # the last two fretted (6, 8): a tie, the lower fret
    assert rules.hand_string(E4, [7, 9], STANDARD_TUNING, 2) == 3  # capo 2: fret 7 on G is nearest, not 3 on B


def test_a_piece_is_read_in_the_tuning_and_capo_its_controls_name():
    rules = _script()
    assert rules.piece_guitar(["BOS_None", "CtrlTuning_drop-d", "CtrlCapo_3", "Bar_None"]) == (TUNINGS["drop-d"], 3)
    assert rules.piece_guitar(["BOS_None", "Bar_None"]) == (STANDARD_TUNING, 0)
    assert rules.piece_guitar(["BOS_None", "CtrlTuning_other", "CtrlCapo_0"]) is None
