"""music/texture.py: density and polyphony, defined once for the controls and the evaluation."""

from __future__ import annotations

import math

from guitarformer.music.texture import density, onset_sizes, polyphony, polyphony_class


def test_a_strum_is_one_onset_of_several_notes():
    onsets = [0, 0, 0, 480, 960, 960]
    assert onset_sizes(onsets) == [3, 1, 2]
    assert density(onsets, 4.0) == 0.75  # three strikes in a 4/4 bar
    assert polyphony(onsets) == 2.0


def test_polyphony_class_is_the_most_common_onset_size_ties_to_the_larger():
    assert polyphony_class([0, 1, 2, 3]) == 1
    assert polyphony_class([0, 0, 1, 1, 2]) == 2
    assert polyphony_class([0, 0, 0, 0, 1]) == 3  # four notes together are a chord too
    assert polyphony_class([0, 1, 1, 1]) == 3  # one single, one chord: the tie goes to chords
    assert polyphony_class([]) == 0


def test_no_notes_have_no_texture():
    assert math.isnan(density([], 4.0)) and math.isnan(polyphony([]))
