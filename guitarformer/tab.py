"""Guitar tab: choose a (string, fret) for every note (Viterbi fingering) and render it as ASCII tab or Guitar Pro 5.

Strings are numbered as in tab: 1 = highest-pitched string .. len(tuning) = lowest. `tuning` lists the
open-string MIDI pitches lowest string first (as in `GuitarScore`). Fret numbers are relative to the
capo: fret 0 is the capo (or the nut without one), so pitch == tuning[len(tuning) - string] + capo + fret.

Unplayable notes get the marker `UNPLAYABLE == (-1, -1)`: a pitch outside the tuning's range, or a
note of a chord that cannot be given a string of its own (more notes than strings, or two notes that
only fit on the same string). Callers rendering tab skip those notes; the MIDI keeps them.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from guitarformer.data.score import MAX_FRET, STANDARD_TUNING

UNPLAYABLE: tuple[int, int] = (-1, -1)

# Every fingering cost is a weight times a feature count, so the weights can be fit on human tabs
# (scripts/bench_fretting.py --fit). Layout of the weight/feature vector:
_N_FRET = 25  # per note: fret 0..24 (higher frets share the last bin)
_N_STRING = 8  # per note: tab string 1..8
_N_SPAN = 7  # per chord: fretted span 0..5, 6+
_MOVE_BIN = (0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 8, 8) + (9,) * 12  # |hand shift| 0..24 frets -> bin
_N_MOVE = 10
_FRET0 = 0
_STRING0 = _FRET0 + _N_FRET
_SPAN0 = _STRING0 + _N_STRING
_GAP = _SPAN0 + _N_SPAN  # per unused string inside a chord's string range
_MOVE0 = _GAP + 1
_MOVE_REST = _MOVE0 + _N_MOVE  # per fret of hand shift (up to 12) when nothing sounds at the onset
_JUMP = _MOVE_REST + 1  # per string the mean string moves
_CONTRARY = _JUMP + 1  # single note to single note: string moves against the pitch direction
_SAME = _CONTRARY + 1  # single note to single note on the same string...
_SLIDE = _SAME + 1  # ...per fret moved along it
_CUT = _SLIDE + 1  # per string re-used while its previous note still sounds
_OPEN5 = _CUT + 1  # per open string while the hand is at fret 5 or above
_OPEN9 = _OPEN5 + 1  # ...and again at fret 9 or above
_SP_BIN = (0,) + (1,) * 4 + (2,) * 4 + (3,) * 4 + (4,) * 12  # fret 0..24 -> open, 1-4, 5-8, 9-12, 13+
_N_SP = 5
_SP0 = _OPEN9 + 1  # per note, by (tab string, fret bin): which region of the neck a string is played in
# Hand window (a lazily moving hand): the index finger at fret h covers frets h..h+3; an onset whose fretted notes
# fit leaves h where it is, else h moves the least that covers them. Per onset, that move in bins:
_WIN_BIN = (0, 1, 2, 3, 4, 5, 6, 6, 6) + (7,) * 16  # 0, 1, 2, 3, 4, 5, 6-8, 9+
_N_WIN = 8
_WIN0 = _SP0 + _N_STRING * _N_SP
_SF0 = _WIN0 + _N_WIN  # per note, by (tab string 1..8, fret 0..24)
N_BASE = _SF0 + _N_STRING * _N_FRET  # features of one fingering on its own (the first pass uses only these)
# Piece-level features (second pass): per note, agreement of the candidate string with what the FIRST pass chose
# elsewhere in the same part (never with the human tab, so they are the same at fit and test time).
_PIECE0 = N_BASE
_P_PITCH = _PIECE0  # share of the part's other notes of this pitch that pass 1 put on this string
_P_BIGRAM = _P_PITCH + 1  # ...of the other notes of this pitch after the same previous pitch
_P_TRIGRAM = _P_BIGRAM + 1  # ...with the same previous and next pitch (a repeated phrase)
_P_PREV = _P_TRIGRAM + 1  # 1 if pass 1 put the previous note of this pitch on this string
_P_NEXT = _P_PREV + 1  # ...the next note of this pitch
_P_REGION = _P_NEXT + 1  # share of the part's other notes that pass 1 played in this note's fret region
_P_LOCAL = _P_REGION + 1  # ...of the notes within 8 onsets either side
# Also per note, from the pitches alone: its fret region (as _SP_BIN) x the band of the highest pitch within 6
# onsets either side (up to E4 = 64, 65-69, 70-74, 75-79, 80+): a passage that climbs is played higher.
_P_REACH = _P_LOCAL + 1
_REACH_BANDS = (65, 70, 75, 80)
_N_PIECE = _P_REACH + _N_SP * (len(_REACH_BANDS) + 1) - _PIECE0
_N_FROM_FIRST = _P_REACH - _PIECE0  # piece features computed from a first pass; the rest need only the pitches
N_FEATURES = _PIECE0 + _N_PIECE

# Fit by an averaged structured perceptron on one half of the shared GP + classtab files (split by file name
# hash; scripts/bench_fretting.py --fit); docs/FRETTING.md gives the held-out accuracy on the other half.
# Rounded to 3 decimals. _FIRST: the first pass (no weight on features computed from a first pass);
# _FITTED: the second pass, whose piece features come from the _FIRST decoding of the same part.
_FIRST = (
    # fret 0..24
    -1.481, -0.31, -0.944, -0.695, 0.105, -0.628, 0.16, 0.304, 0.44, -0.228, 0.463, 1.01, 1.565,
    1.924, 1.292, 2.275, 2.544, 3.512, 4.076, 4.682, 3.876, 7.026, 2.746, 6.028, 5.856,
    # tab string 1..8
    -0.494, -0.586, -0.6, -0.396, 0.007, 0.988, 1.08, 0,
    # span 0..5, 6+
    1.463, 1.814, 2.132, 3.73, 7.024, 9.841, -31.682,
    # string gap
    0.543,
    # hand shift bins 0, 1, 2, 3, 4, 5, 6, 7-8, 9-12, 13+
    0.082, -0.191, -0.135, 0.621, 0.595, 0.83, 1.622, 2.128, 2.77, 3.361,
    # shift after a rest, string jump, contrary, same string, slide, cut sustain, open at 5+, open at 9+
    -0.028, 0.321, 1.178, -1.791, 1.27, 0.052, 0.83, 0.689,
    # tab string 1..8 x fret open, 1-4, 5-8, 9-12, 13+
    -1.209, -0.619, 0.06, -0.007, 1.281,
    -0.145, -0.75, -1.155, 0.233, 1.232,
    0.564, -0.794, -0.289, -0.906, 0.824,
    0.003, 0.324, -0.363, -0.52, 0.162,
    -0.602, -0.541, -0.085, 0, 1.235,
    -0.09, -0.465, -0.899, -0.384, 2.825,
    0, 0, 0.409, 0.194, 0.478,
    0, 0, 0, 0, 0,
    # hand-window move bins 0, 1, 2, 3, 4, 5, 6-8, 9+
    -4.498, -2.895, -2.17, -1.336, -0.493, -0.143, 0.713, 1.269,
    # tab string 1..8 x fret 0..24
    -0.497, -0.057, -0.087, -0.594, 0.565, -0.557, 0.729, 0.074, -0.117, 0.084, -0.035, 0.392, -0.564, 1.08, 0.091, 0.208, 0.114, -0.975, 0.42, -0.668, 0.135, 0, 0.072, 0, 0,
    -0.512, -0.686, -0.425, 0.091, 0.575, -0.579, 0.487, -0.325, -0.052, 0.3, -0.624, 0.305, 0.377, -0.046, 0.152, 0.082, -0.699, 1.069, -0.244, -0.513, 0.162, -0.263, 0.975, -0.42, 0.596,
    0.316, -0.527, 0.71, -0.291, -0.558, 0.293, -1.005, 0.107, 0.242, -0.792, 0.446, 0.137, -0.167, 0.482, 0.636, -0.437, 0.969, 0.362, 0.375, -0.607, 0.179, -0.389, -0.706, 0.486, -0.431,
    -0.096, 0.838, -0.905, 0.621, 0, 0.935, -0.779, 0.453, -1.063, -0.814, 0.323, -0.447, 0.371, -0.419, -0.303, -0.081, -0.616, 0.014, 0.922, 0.454, -0.475, 0.757, -0.151, -0.148, 0.592,
    -0.061, 0.864, 0.201, -0.275, -0.765, -0.553, 0.196, -0.316, 0.879, 0.753, -0.429, -0.351, 0.202, -1.07, -1.24, 0.185, 0.655, -0.251, 0.043, 1.632, -0.224, 0.862, -1.066, 0.63, -0.439,
    -0.024, -0.16, 0, -0.012, 0.003, -0.11, 0.497, -0.068, -0.092, 0.058, 0.144, -0.14, -0.01, 0.048, -0.008, 0.23, -0.133, 0.221, -1.259, -0.04, 0.592, 0.17, 0.646, -0.138, -0.346,
    0, 0, 0, 0, 0, 0.024, 0, 0, 0.16, 0, 0.012, 0.008, 0, 0.138, 0, 0.098, 0, 0, -0.142, 0, 0, 0, 0.161, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    # piece: pitch, bigram, trigram share, previous/next same pitch, region share, local region share (from pass 1)
    0, 0, 0, 0, 0, 0, 0,
    # piece: fret region x highest pitch nearby (<=64, 65-69, 70-74, 75-79, 80+)
    -1.054, -1.333, -0.87, -0.52, 3.777,
    -0.742, -1.06, -0.505, -0.415, 2.721,
    0.385, 0.495, 0.118, 0.438, -0.323,
    0.017, 0.509, 0.142, -0.177, -0.424,
    0.519, 0.517, 0.575, 0.212, -1.231,
)
_FITTED = (
    # fret 0..24
    -1.771, 0.244, -0.982, -1.033, 0.239, -1.146, -0.262, 0.315, 0.196, -0.359, 0.072, 0.784, 1.778,
    1.516, 0.91, 2.193, 2.859, 3.377, 4.288, 4.881, 4.049, 7.853, 2.79, 6.715, 6.092,
    # tab string 1..8
    0.093, -0.499, -0.657, -0.6, -0.251, 0.618, 1.297, 0,
    # span 0..5, 6+
    1.221, 1.345, 1.797, 3.868, 8.214, 11.727, -35.11,
    # string gap
    0.494,
    # hand shift bins 0, 1, 2, 3, 4, 5, 6, 7-8, 9-12, 13+
    -0.053, -0.354, -0.23, 0.64, 0.587, 0.848, 1.658, 2.198, 2.503, 2.639,
    # shift after a rest, string jump, contrary, same string, slide, cut sustain, open at 5+, open at 9+
    -0.126, 0.252, 0.848, -1.724, 1.206, 0.066, 0.651, 0.564,
    # tab string 1..8 x fret open, 1-4, 5-8, 9-12, 13+
    -1.127, -0.595, 0.335, 0.092, 1.387,
    -0.186, -0.859, -1.183, 0.242, 1.487,
    0.88, -0.878, -0.755, -1.121, 1.216,
    -0.069, 0.665, -0.609, -1.237, 0.652,
    -1.154, -0.525, -0.198, 0.105, 1.521,
    -0.114, -0.339, -1.453, -0.242, 2.767,
    0, 0, 0.368, 0.234, 0.695,
    0, 0, 0, 0, 0,
    # hand-window move bins 0, 1, 2, 3, 4, 5, 6-8, 9+
    -4.672, -3.02, -2.287, -1.48, -0.747, -0.457, 0.585, 1.28,
    # tab string 1..8 x fret 0..24
    -0.415, 0.014, 0.163, -0.443, 0.117, -0.738, 1.197, 0.445, -0.5, 0.065, 0.085, 0.336, -0.509, 1.353, -0.108, 0.096, 0.235, -1.187, 0.677, -0.898, 0.27, 0, 0.144, 0, 0,
    -0.553, -0.851, -0.943, 0.235, 1.004, -0.316, 0.474, -0.488, -0.168, -0.052, -1.104, 0.607, 0.916, -0.072, 0.307, -0.01, -0.783, 1.573, 0.221, -0.752, -0.081, -0.561, 1.187, -0.677, 0.754,
    0.632, -0.539, 1.107, -0.309, -1.008, 0.398, -1.792, -0.279, 0.845, -0.809, 0.445, 0.399, -0.628, 0.344, 0.258, -0.216, 1.499, 0.457, 0.761, -0.812, 0.31, -0.867, -1.292, 1.005, -0.137,
    -0.168, 1.139, -1.297, 0.596, 0.456, 1.5, -1.072, 0.635, -1.763, -0.666, 0.1, -1.017, 0.299, -0.498, -0.264, -0.059, -1.253, -0.054, 1.413, 0.389, -0.886, 1.393, 0.27, -0.185, 0.771,
    -0.613, 1.159, 0.427, -0.832, -0.712, -1.038, 0.53, -0.536, 1.137, 1.106, -0.313, -0.676, 0.163, -1.736, -1.511, -0.233, 1.096, -1.011, 0.031, 2.876, -0.03, 1.689, -1.782, 1.136, -0.521,
    -0.048, -0.095, 0, -0.045, 0.097, -0.919, 0.366, 0.158, 0.067, -0.188, 0.19, 0.013, 0.179, 0.199, 0.263, 0.427, -0.188, 0.527, -2.491, -0.346, 0.959, 0.31, 1.104, -0.181, -0.659,
    0, 0, 0, 0, 0, 0.048, 0, 0, 0.095, 0, 0.045, 0.015, 0, 0.214, 0, 0.197, 0, 0, -0.285, 0, 0, 0, 0.345, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    # piece: pitch, bigram, trigram share, previous/next same pitch, region share, local region share (from pass 1)
    -1.209, -0.473, 0.066, -0.184, -0.188, -1.751, -1.418,
    # piece: fret region x highest pitch nearby (<=64, 65-69, 70-74, 75-79, 80+)
    -1.84, -2.055, -1.862, -1.017, 6.773,
    -1.197, -1.221, -0.988, -0.494, 3.9,
    0.622, 0.98, 0.344, 0.463, -0.182,
    0.19, 0.686, 0.263, -0.11, -0.895,
    1.06, 1.051, 0.531, 0.16, -1.618,
)

# The same features refit for distorted electric guitar (programs 29-30): the two passes above fine-tuned (6 epochs)
# on the fit half's GP tracks with those programs (scripts/bench_fretting.py --fit-distorted). Riffs there sit on
# the low strings in position V-IX, where the classical weights above choose open position.
_DISTORTED_FIRST = (
    # fret 0..24
    0.006, -0.121, -0.548, -1.254, 0.263, -0.831, -0.712, 1.591, 0.08, -0.367, 0.055, -0.314, 2.711,
    1.33, 0.152, 1.9, 2.905, 2.481, 3.532, 4.674, 4.336, 7.567, 3.304, 6.758, 6.102,
    # tab string 1..8
    0.209, -0.628, -1.437, -0.307, -0.38, 1.462, 1.08, 0,
    # span 0..5, 6+
    3.488, 3.535, 0.232, 5.097, 5.997, 9.781, -34.489,
    # string gap
    6.655,
    # hand shift bins 0, 1, 2, 3, 4, 5, 6, 7-8, 9-12, 13+
    -0.939, -0.713, -0.524, 1.307, -1.07, 1.051, 1.804, 2.385, 2.955, 4.746,
    # shift after a rest, string jump, contrary, same string, slide, cut sustain, open at 5+, open at 9+
    -0.155, 1.491, 2.958, -2.089, 0.718, 0.012, 2.185, 1.108,
    # tab string 1..8 x fret open, 1-4, 5-8, 9-12, 13+
    -1.553, 0.387, 0.906, 1.227, -0.759,
    -0.373, 0.284, -1.285, -0.237, 0.984,
    -0.129, -0.576, -0.941, -1.226, 1.434,
    1.149, 0.186, 0.059, -1.273, -0.427,
    1.003, -2.479, -1.053, -0.551, 2.699,
    -0.09, -0.465, -0.566, -0.25, 2.832,
    0, 0, 0.409, 0.194, 0.478,
    0, 0, 0, 0, 0,
    # hand-window move bins 0, 1, 2, 3, 4, 5, 6-8, 9+
    -6.495, -4.631, -2.04, -0.074, -1.717, 1.058, 1.189, 2.475,
    # tab string 1..8 x fret 0..24
    -0.841, 0.26, 0.05, -0.201, 0.725, 0.513, 0.505, 0.771, -0.813, 0.76, 0.069, 0.303, -0.02, 0.638, 0.256, -0.275, 0.114, -1.536, -0.128, -0.839, 0.135, 0, 0.072, 0, 0,
    -0.74, -0.79, 1.055, -0.302, 0.626, 0.153, 0.421, -1.101, -0.072, 0.14, -0.334, 0.136, -0.054, -0.349, -0.267, -0.472, -0.61, 0.278, 0.055, -0.821, 0.622, -0.263, 1.536, 0.128, 0.767,
    -0.377, -0.149, 1.307, -0.819, -0.787, 0.638, -1.841, 0.051, 0.137, -1.115, 0.082, 0.062, 0.275, 0.482, -0.492, -0.043, 0.602, 1.361, 0.079, -0.157, 0.179, -0.142, -0.564, 0.63, -0.407,
    1.05, 1.007, -1.795, 1.028, 0.175, 1.722, -0.926, -0.194, -0.633, -0.883, -0.06, -1.206, 0.83, -0.366, -0.674, 0.032, -0.093, -0.801, 0.922, 0.222, -0.475, 0.859, -0.151, -0.109, 0.592,
    1.544, 0.293, -0.727, -0.713, -0.765, -1.751, 0.027, 0.491, 0.472, 0.491, -0.537, -0.582, 0.252, -0.972, -0.714, 0.326, 0.771, -0.114, 0.043, 1.885, -0.224, 1.054, -1.066, 0.63, -0.439,
    -0.024, -0.16, 0, -0.012, 0.003, -2.049, 1.068, 1.194, 0.346, 0.058, 0.195, -0.14, 0.073, 0.048, 0.079, 0.244, -0.133, 0.221, -1.259, -0.04, 0.592, 0.17, 0.5, -0.138, -0.294,
    0, 0, 0, 0, 0, 0.024, 0, 0, 0.16, 0, 0.012, 0.008, 0, 0.138, 0, 0.098, 0, 0, -0.142, 0, 0, 0, 0.161, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    # piece: pitch, bigram, trigram share, previous/next same pitch, region share, local region share (from pass 1)
    0, 0, 0, 0, 0, 0, 0,
    # piece: fret region x highest pitch nearby (<=64, 65-69, 70-74, 75-79, 80+)
    -0.766, -1.992, -0.823, -0.389, 3.971,
    0.873, -1.313, -1.489, -0.947, 2.874,
    0.654, 1.71, -0.267, 0.812, -1.796,
    0.147, 0.411, 1.047, -0.902, -0.636,
    -0.296, 0.496, 0.843, 0.239, -0.69,
)
_DISTORTED = (
    # fret 0..24
    -1.591, -0.4, -0.762, -1.317, 0.318, -0.534, 0.36, 0.703, 0.099, 0.097, -0.646, -0.075, 2.239,
    1.706, 0.705, 2.357, 2.753, 2.539, 3.492, 4.583, 4.232, 8.295, 2.894, 7.19, 6.361,
    # tab string 1..8
    0.553, -0.396, -1.089, -0.923, -0.716, 1.274, 1.297, 0,
    # span 0..5, 6+
    3.24, 2.393, 1.295, 4.403, 7.271, 11.627, -37.955,
    # string gap
    4.448,
    # hand shift bins 0, 1, 2, 3, 4, 5, 6, 7-8, 9-12, 13+
    -0.157, -0.109, -0.907, 0.537, -0.7, 1.1, 1.777, 1.762, 2.471, 3.875,
    # shift after a rest, string jump, contrary, same string, slide, cut sustain, open at 5+, open at 9+
    -0.2, 1.095, 2.449, -2.027, 0.638, -0.086, 2.209, 1.325,
    # tab string 1..8 x fret open, 1-4, 5-8, 9-12, 13+
    -1.313, -0.401, 0.87, 0.642, 0.753,
    -0.655, -0.724, -0.548, -0.016, 1.547,
    0.474, -1.0, -0.449, -1.131, 1.017,
    0.113, 1.123, -0.282, -1.551, -0.324,
    -0.095, -1.819, -0.711, -0.652, 2.561,
    -0.114, -0.339, -1.218, -0.114, 3.059,
    0, 0, 0.368, 0.234, 0.695,
    0, 0, 0, 0, 0,
    # hand-window move bins 0, 1, 2, 3, 4, 5, 6-8, 9+
    -6.003, -4.559, -2.204, -0.115, -2.096, 0.335, 0.766, 2.29,
    # tab string 1..8 x fret 0..24
    -0.601, 0.106, -0.078, -0.163, 0.181, -0.381, 1.01, 1.237, -0.925, 0.542, -0.08, 0.336, -0.271, 1.145, 0.306, -0.087, 0.235, -1.317, 0.257, -1.004, 0.27, 0, 0.144, 0, 0,
    -1.022, -0.967, -0.612, 0.01, 1.15, 0.272, 0.679, -0.846, 0.031, -0.116, -0.641, 0.232, 0.635, 0.161, 0.301, -0.276, -0.783, 1.154, 0.354, -1.182, 0.078, -0.561, 1.317, -0.257, 0.86,
    0.226, -0.249, 1.367, -0.596, -1.393, 0.993, -1.878, -0.234, 0.597, -0.749, 0.107, 0.396, -0.358, 0.344, -0.231, 0.322, 0.841, 0.649, 0.251, -0.381, 0.31, -0.687, -1.217, 1.022, -0.113,
    0.014, 1.139, -1.308, 0.81, 0.711, 2.138, -1.19, 0.217, -1.538, -0.281, -0.379, -1.326, 0.387, -0.395, -1.003, -0.018, -0.765, -0.803, 1.413, 0.059, -0.862, 1.541, 0.27, -0.146, 0.771,
    0.446, 0.25, 0.307, -1.097, -0.712, -1.286, 0.53, -0.587, 0.923, 0.703, -0.578, -0.848, 0.246, -1.674, -1.042, -0.233, 1.159, -0.817, 0.031, 3.014, -0.03, 1.803, -1.782, 1.136, -0.521,
    -0.048, -0.095, 0, -0.045, 0.097, -2.237, 1.174, 0.536, 0.434, -0.188, 0.256, 0.013, 0.241, 0.199, 0.41, 0.46, -0.188, 0.601, -2.491, -0.346, 0.959, 0.31, 1.002, -0.181, -0.52,
    0, 0, 0, 0, 0, 0.048, 0, 0, 0.095, 0, 0.045, 0.015, 0, 0.214, 0, 0.197, 0, 0, -0.285, 0, 0, 0, 0.345, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    # piece: pitch, bigram, trigram share, previous/next same pitch, region share, local region share (from pass 1)
    -2.382, -0.2, -1.257, 0.243, 0.119, -3.938, -1.227,
    # piece: fret region x highest pitch nearby (<=64, 65-69, 70-74, 75-79, 80+)
    -1.633, -1.878, -1.97, -1.487, 6.967,
    -0.193, -1.781, -0.973, -0.769, 3.716,
    0.657, 1.266, 0.587, 0.96, -1.243,
    0.08, -0.054, 1.388, -0.307, -0.974,
    0.104, 1.259, 0.78, -0.055, -0.904,
)


@dataclass(frozen=True)
class FretCosts:
    """Weights of the fingering cost (each multiplies a feature count; see `fingering_features`).

    Defaults are fit on human tabs (scripts/bench_fretting.py --fit, docs/FRETTING.md)."""

    fret: tuple[float, ...] = _FITTED[_FRET0:_STRING0]  # per note, by fret 0..24
    string: tuple[float, ...] = _FITTED[_STRING0:_SPAN0]  # per note, by tab string 1..8
    span: tuple[float, ...] = _FITTED[_SPAN0:_GAP]  # per chord, by span of its fretted notes 0..5, 6+
    string_gap: float = _FITTED[_GAP]
    move: tuple[float, ...] = _FITTED[_MOVE0:_MOVE_REST]  # per onset, by hand shift bin (see _MOVE_BIN)
    move_after_rest: float = _FITTED[_MOVE_REST]
    string_jump: float = _FITTED[_JUMP]
    contrary: float = _FITTED[_CONTRARY]
    same_string: float = _FITTED[_SAME]
    slide: float = _FITTED[_SLIDE]
    cut_sustain: float = _FITTED[_CUT]
    open_at_5: float = _FITTED[_OPEN5]
    open_at_9: float = _FITTED[_OPEN9]
    string_region: tuple[float, ...] = _FITTED[_SP0:_WIN0]  # per note, by (tab string 1..8, fret 0, 1-4, 5-8, 9-12, 13+)
    window: tuple[float, ...] = _FITTED[_WIN0:_SF0]  # per onset, by hand-window move bin (see _WIN_BIN)
    string_fret: tuple[float, ...] = _FITTED[_SF0:N_BASE]  # per note, by (tab string 1..8, fret 0..24)
    piece: tuple[float, ...] = _FITTED[_PIECE0:]  # second pass: agreement with the first pass elsewhere in the part
    # Weights (N_FEATURES of them; those of features computed from a first pass are 0) of the first pass that
    # the piece features are computed from; None: this vector's own. No weight on a feature computed from a
    # first pass: one pass only.
    first_pass: tuple[float, ...] | None = _FIRST
    max_span: int = 5  # fixed, not fit: spans beyond this cost `impossible` (still allowed if nothing else fits)
    impossible: float = 50.0
    dropped: float = 1000.0  # per chord note left without a string
    # Learned string model (guitarformer/fret_model.py): per note, nn_weight * -log p(string | context) is added
    # to the cost, in both passes. Fixed, not part of `vector()`; 0 (or no weights file): hand-made costs only.
    nn_weight: float = 0.5

    def vector(self) -> np.ndarray:
        """The fitted weights as one vector in `fingering_features` order."""
        w = [*self.fret, *self.string, *self.span, self.string_gap, *self.move, self.move_after_rest, self.string_jump,
             self.contrary, self.same_string, self.slide, self.cut_sustain, self.open_at_5, self.open_at_9, *self.string_region,
             *self.window, *self.string_fret, *self.piece]
        if len(w) != N_FEATURES:
            raise ValueError(f"FretCosts has {len(w)} weights, expected {N_FEATURES}")
        return np.asarray(w, dtype=float)

    def first(self) -> "FretCosts":
        """The first-pass costs: `first_pass` (or this vector) without the terms that need a first pass."""
        w = self.vector() if self.first_pass is None else np.array(self.first_pass, dtype=float)
        w[_PIECE0:_PIECE0 + _N_FROM_FIRST] = 0.0
        return FretCosts.from_vector(w, first_pass=None, max_span=self.max_span, impossible=self.impossible,
                                     dropped=self.dropped, nn_weight=self.nn_weight)

    @classmethod
    def from_vector(cls, w: Sequence[float], **fixed: Any) -> "FretCosts":
        w = [float(x) for x in w]
        if len(w) != N_FEATURES:
            raise ValueError(f"{len(w)} weights, expected {N_FEATURES}")
        return cls(
            fret=tuple(w[_FRET0:_STRING0]), string=tuple(w[_STRING0:_SPAN0]), span=tuple(w[_SPAN0:_GAP]),
            string_gap=w[_GAP], move=tuple(w[_MOVE0:_MOVE_REST]), move_after_rest=w[_MOVE_REST],
            string_jump=w[_JUMP], contrary=w[_CONTRARY], same_string=w[_SAME], slide=w[_SLIDE], cut_sustain=w[_CUT],
            open_at_5=w[_OPEN5], open_at_9=w[_OPEN9], string_region=tuple(w[_SP0:_WIN0]),
            window=tuple(w[_WIN0:_SF0]), string_fret=tuple(w[_SF0:N_BASE]), piece=tuple(w[_PIECE0:]), **fixed,
        )


DEFAULT_COSTS = FretCosts()
DISTORTED_PROGRAMS = (29, 30)  # General MIDI overdriven guitar, distortion guitar
DISTORTED_COSTS = FretCosts.from_vector(_DISTORTED, first_pass=_DISTORTED_FIRST)


def costs_for_program(program: int | None) -> FretCosts:
    """The fitted costs for a track's General MIDI program: distorted electric guitar (29-30) has its own (riffs
    on the low strings, power chords in position), everything else the default (fit mostly on classical tab)."""
    return DISTORTED_COSTS if program in DISTORTED_PROGRAMS else DEFAULT_COSTS
_BEAM = 16  # fingerings kept per onset (by chord cost) before the Viterbi pass


def _note_tuple(n: Any) -> tuple[int, int, int]:
    if hasattr(n, "pitch"):
        return int(n.time), int(n.duration), int(n.pitch)
    onset, duration, pitch = n
    return int(onset), int(duration), int(pitch)


def _group_onsets(notes: Sequence[tuple[int, int, int]]) -> list[list[int]]:
    """Indices of the notes, grouped by onset, in time order."""
    order = sorted(range(len(notes)), key=lambda i: (notes[i][0], -notes[i][2]))
    groups: list[list[int]] = []
    last = None
    for i in order:
        if notes[i][0] != last:
            groups.append([])
            last = notes[i][0]
        groups[-1].append(i)
    return groups


def _chord_features(assign: Sequence[tuple[int, int]], n_strings: int, acc: np.ndarray) -> tuple[int, int]:
    """Add one chord's features to `acc`; return (dropped notes, 1 if the span is beyond reach else 0) for the fixed costs."""
    played = [(s, f) for s, f in assign if s >= 0]
    fretted = [f for _, f in played if f > 0]
    for s, f in played:
        acc[_FRET0 + min(f, _N_FRET - 1)] += 1
        acc[_STRING0 + min(n_strings - s, _N_STRING) - 1] += 1
        acc[_SP0 + (min(n_strings - s, _N_STRING) - 1) * _N_SP + _SP_BIN[min(f, 24)]] += 1
        acc[_SF0 + (min(n_strings - s, _N_STRING) - 1) * _N_FRET + min(f, _N_FRET - 1)] += 1
    span = max(fretted) - min(fretted) if fretted else 0
    if fretted:
        acc[_SPAN0 + min(span, _N_SPAN - 1)] += 1
    if len(played) > 1:
        strings = [s for s, _ in played]
        acc[_GAP] += max(strings) - min(strings) + 1 - len(played)
    return len(assign) - len(played), span


class _Cand:
    """One fingering of one onset's chord: a string index (0 = lowest) and fret per note, or (-1, -1)."""

    __slots__ = ("assign", "cost", "pos", "top", "mean_string", "mask", "opens")

    def __init__(self, assign: tuple[tuple[int, int], ...], cost: float):
        self.assign = assign
        self.cost = cost
        fretted = [f for s, f in assign if f > 0]
        self.pos = min(fretted) if fretted else math.nan  # hand position = index-finger fret
        self.top = max(fretted) if fretted else math.nan
        played = [s for s, f in assign if s >= 0]
        self.mean_string = sum(played) / len(played) if played else math.nan
        self.mask = sum(1 << s for s in played)
        self.opens = sum(1 for s, f in assign if f == 0)


def _chord_cost(assign, n_strings: int, w: np.ndarray, c: FretCosts) -> float:
    acc = np.zeros(N_FEATURES)
    dropped, span = _chord_features(assign, n_strings, acc)
    return float(acc @ w) + c.dropped * dropped + (c.impossible if span > c.max_span else 0.0)


def _chord_cands(pitches: Sequence[int], opens: Sequence[int], max_fret: int, cost_fn, beam: int, extra=None) -> list[_Cand]:
    """The `beam` cheapest assignments of the chord's notes to distinct strings (plus `extra`, if given)."""
    options = []
    for p in pitches:
        opts = [(s, p - o) for s, o in enumerate(opens) if 0 <= p - o <= max_fret]
        options.append(opts)
    results: list[tuple[float, tuple]] = []

    def search(i: int, used: int, acc: list, allow_drop: bool) -> None:
        if i == len(options):
            results.append((cost_fn(acc), tuple(acc)))
            return
        for s, f in options[i]:
            if not used & (1 << s):
                acc.append((s, f))
                search(i + 1, used | (1 << s), acc, allow_drop)
                acc.pop()
        if allow_drop or not options[i]:
            acc.append(UNPLAYABLE)
            search(i + 1, used, acc, allow_drop)
            acc.pop()

    if len(pitches) <= len(opens):
        search(0, 0, [], False)
    if not results or all(any(s < 0 for s, _ in a) for _, a in results):
        # No full assignment: let any note go unplayed, the fewest possible (each costs `dropped`).
        results.clear()
        if len(pitches) > 8:  # keep the search small: extra notes beyond the highest 8 are dropped
            pitches_kept = len(opens) + 2
            options[pitches_kept:] = [[] for _ in options[pitches_kept:]]
        search(0, 0, [], True)
    results.sort(key=lambda r: r[0])
    kept = results[:beam]
    if extra is not None and all(a != extra for _, a in kept):
        kept.append((cost_fn(list(extra)), extra))
    return [_Cand(a, c) for c, a in kept]


def _window_move(h, lo, hi):
    """Lazy hand window: (new index-finger fret, frets moved) for a hand at `h` meeting fretted notes lo..hi
    (NaN h: no hand yet; NaN lo: nothing fretted). Works elementwise on numpy arrays."""
    up = np.minimum(lo, hi - 3)
    new = np.where(lo < h, lo, np.where(hi > h + 3, up, h))
    new = np.where(np.isnan(h), lo, new)
    new = np.where(np.isnan(lo), h, new)
    return new, np.abs(new - h)


def _shift_tables(c: FretCosts) -> tuple[np.ndarray, np.ndarray]:
    """Cost of a hand shift by 0..24 frets (index 25 = no shift known: free), without and with a rest before it."""
    move = np.array([c.move[b] for b in _MOVE_BIN] + [0.0])
    rest = move + c.move_after_rest * np.minimum(np.arange(len(move)), 12)
    rest[-1] = 0.0
    return move, rest


def _piece_table(notes_t, tuning, capo, max_fret, first) -> np.ndarray:
    """Piece-level features of every (note, string index 0 = lowest): (notes, strings, _N_PIECE) counts/shares,
    from `first` ((string, fret) per note, a first-pass fingering). Each note's own first-pass choice is left
    out of its shares (leave-one-out), so a note seen once in a part gets no piece signal. `first` None: only
    the pitch-only features (what the first pass itself uses), the first-pass columns are 0."""
    n = len(tuning)
    n_notes = len(notes_t)
    out = np.zeros((n_notes, n, _N_PIECE))
    if n_notes == 0:
        return out
    opens = np.array([p + capo for p in tuning])
    pitch = np.array([x[2] for x in notes_t])
    own = np.array([n - s if s >= 0 else -1 for s, _ in first]) if first is not None else np.full(n_notes, -1)
    frets = pitch[:, None] - opens[None, :]
    ok = (frets >= 0) & (frets <= max_fret - capo)
    bins = np.array(_SP_BIN)[np.clip(frets, 0, 24)]
    groups = _group_onsets(notes_t)
    onset_of = np.empty(n_notes, dtype=np.intp)
    for t, g in enumerate(groups):
        onset_of[g] = t
    top = [notes_t[g[0]][2] for g in groups]  # highest pitch per onset
    prev_top = [-1] + top[:-1]
    next_top = top[1:] + [-1]
    played = own >= 0
    own_c = np.where(played, own, 0)

    def shares(keys) -> np.ndarray:
        """Per note and string: share of the OTHER first-pass-played notes with the same key on that string."""
        ids: dict = {}
        kid = np.array([ids.setdefault(k, len(ids)) for k in keys])
        counts = np.zeros((len(ids), n))
        np.add.at(counts, (kid[played], own[played]), 1)
        c = counts[kid]
        c[np.flatnonzero(played), own[played]] -= 1
        tot = c.sum(1, keepdims=True)
        return np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)

    keys1 = pitch.tolist()
    if first is not None:
        out[:, :, 0] = shares(keys1)
        out[:, :, 1] = shares([(p, prev_top[onset_of[i]]) for i, p in enumerate(keys1)])
        out[:, :, 2] = shares([(p, prev_top[onset_of[i]], next_top[onset_of[i]]) for i, p in enumerate(keys1)])
    order = [i for g in groups for i in g]
    last: dict[int, int] = {}
    for i in order:  # previous note of the same pitch
        if keys1[i] in last and last[keys1[i]] >= 0:
            out[i, last[keys1[i]], 3] = 1.0
        last[keys1[i]] = own[i]
    last = {}
    for i in reversed(order):
        if keys1[i] in last and last[keys1[i]] >= 0:
            out[i, last[keys1[i]], 4] = 1.0
        last[keys1[i]] = own[i]
    # Fret regions pass 1 played in: the whole part, and 8 onsets either side (own onset left out).
    own_bin = np.where(played, bins[np.arange(n_notes), own_c], -1)
    hist = np.array([(own_bin == b).sum() for b in range(_N_SP)], dtype=float)
    loo = hist[None, :] - (own_bin[:, None] == np.arange(_N_SP)[None, :])
    tot = loo.sum(1, keepdims=True)
    region = np.divide(loo, tot, out=np.zeros_like(loo), where=tot > 0)
    out[:, :, 5] = np.take_along_axis(region, bins, axis=1)
    per_onset = np.zeros((len(groups) + 1, _N_SP))
    np.add.at(per_onset, (onset_of[played] + 1, own_bin[played]), 1)
    cum = per_onset.cumsum(0)
    lo = np.clip(onset_of - 8, 0, len(groups))
    hi = np.clip(onset_of + 9, 0, len(groups))
    win = cum[hi] - cum[lo] - per_onset[onset_of + 1]
    tot = win.sum(1, keepdims=True)
    local = np.divide(win, tot, out=np.zeros_like(win), where=tot > 0)
    out[:, :, 6] = np.take_along_axis(local, bins, axis=1)
    top_arr = np.array(top)
    n_on = len(groups)
    reach = np.array([top_arr[max(0, t - 6): t + 7].max() for t in range(n_on)])
    band = np.searchsorted(np.array(_REACH_BANDS), reach, side="right")[onset_of]  # per note
    cols = _P_REACH - _PIECE0 + band[:, None] * _N_SP + bins  # (notes, strings)
    np.put_along_axis(out.reshape(n_notes * n, _N_PIECE), cols.reshape(-1, 1), 1.0, axis=1)
    out[~ok] = 0.0
    return out


def _nn_model(costs: FretCosts):
    """The learned string model when `costs` weighs it (nn_weight != 0) and its weights file loads, else None."""
    if not costs.nn_weight:
        return None
    from guitarformer import fret_model

    return fret_model.load()


def _nn_costs(notes_t, tuning, capo, max_fret, costs, model) -> np.ndarray | None:
    """costs.nn_weight * -log p(string) per (note, string index; last column: unplayable), or None (no model)."""
    if model is None or not notes_t:
        return None
    from guitarformer import fret_model

    c = fret_model.string_costs(notes_t, tuning, capo, max_fret, model=model)
    return None if c is None else costs.nn_weight * c


def _decode(notes_t, tuning, capo, max_fret, costs, gold=None, piece=None, nn=None):
    """Viterbi over onsets. Returns (groups, chosen candidate per group). `gold` (one (string index, fret) per
    note) is added to each onset's candidates, for fitting. `piece`: the `_piece_table` of a first pass (second
    pass; its terms are weighted by `costs.piece`). `nn`: extra cost per (note, string index), `_nn_costs`."""
    n_strings = len(tuning)
    opens = [p + capo for p in tuning]  # index 0 = lowest string
    fret_room = max_fret - capo
    groups = _group_onsets(notes_t)
    w = costs.vector()
    cache: dict[tuple[int, ...], list[_Cand]] = {}
    layers: list[list[_Cand]] = []
    for g in groups:
        pitches = tuple(notes_t[i][2] for i in g)
        if gold is not None:
            layers.append(_chord_cands(pitches, opens, fret_room, lambda a: _chord_cost(a, n_strings, w, costs), _BEAM,
                                       tuple(gold[i] for i in g)))
        else:
            if pitches not in cache:
                cache[pitches] = _chord_cands(pitches, opens, fret_room, lambda a: _chord_cost(a, n_strings, w, costs), _BEAM)
            layers.append(cache[pitches])
    if not layers:
        return groups, []

    move_tab, rest_tab = _shift_tables(costs)
    popcount = np.array([bin(i).count("1") for i in range(1 << n_strings)])
    extra = None
    if piece is not None and len(notes_t):
        extra = np.zeros((len(notes_t), n_strings + 1))  # last column: unplayable (index -1)
        extra[:, :n_strings] = piece @ np.asarray(costs.piece, dtype=float)
    if nn is not None and len(notes_t):
        extra = nn if extra is None else extra + nn
    static: dict[int, tuple] = {}  # per distinct candidate list (layers of equal chords share one)

    def arrays(t):
        layer = layers[t]
        key = id(layer)
        if key not in static:
            static[key] = (np.array([x.pos for x in layer]), np.array([x.mean_string for x in layer]),
                           np.array([x.cost for x in layer]), np.array([x.opens for x in layer]),
                           np.array([x.mask for x in layer]), np.array([x.assign[0] for x in layer]),
                           np.array([x.top for x in layer]),
                           np.array([[s for s, _ in x.assign] for x in layer], dtype=np.intp))
        pos, ms, cost, opens, mask, first, top, strings = static[key]
        if extra is not None:
            cost = cost + extra[np.asarray(groups[t])[None, :], strings].sum(1)
        return pos, ms, cost, opens, mask, first, top

    # Viterbi: best[j] = cheapest total cost ending in candidate j of the current layer. `hand[j]` carries the
    # last fretted position along that path, so open strings do not make the hand forget where it was.
    prev = arrays(0)
    best = prev[2].copy()
    hand = prev[0]
    win = prev[0]  # lazy hand window along each path
    win_tab = np.array([costs.window[b] for b in _WIN_BIN] + [0.0])  # index 25: no move known
    back: list[np.ndarray] = []
    for t in range(1, len(layers)):
        prev_g, g = groups[t - 1], groups[t]
        onset = notes_t[g[0]][0]
        cur = arrays(t)
        pos_c, ms_c, cost_c, opens_c, mask_c, first_c, top_c = cur
        ends = [notes_t[i][0] + notes_t[i][1] for i in prev_g]
        d = np.abs(hand[:, None] - pos_c[None, :])
        d = np.where(np.isnan(d), 25, np.minimum(d, 24)).astype(np.intp)
        total = best[:, None] + (rest_tab if max(ends) < onset else move_tab)[d]
        if costs.string_jump:
            jump = np.abs(prev[1][:, None] - ms_c[None, :])
            total += costs.string_jump * np.nan_to_num(jump)
        if len(prev_g) == 1 and len(g) == 1:
            pa, pb = notes_t[prev_g[0]][2], notes_t[g[0]][2]
            sa, fa = prev[5][:, 0], prev[5][:, 1]
            sb, fb = first_c[:, 0], first_c[:, 1]
            ok = (sa >= 0)[:, None] & (sb >= 0)[None, :]
            ds = sb[None, :] - sa[:, None]
            same = ok & (ds == 0)
            total += costs.contrary * (ok & (ds * (pb - pa) < 0))
            total += same * (costs.same_string + costs.slide * np.abs(fb[None, :] - fa[:, None]))
        if costs.cut_sustain:
            sus = [k for k, e in enumerate(ends) if e > onset]
            if sus:
                sus_mask = np.array([sum(1 << x.assign[k][0] for k in sus if x.assign[k][0] >= 0) for x in layers[t - 1]])
                total += costs.cut_sustain * popcount[sus_mask[:, None] & mask_c[None, :]]
        if opens_c.any():
            h = np.where(np.isnan(pos_c)[None, :], hand[:, None], pos_c[None, :])
            with np.errstate(invalid="ignore"):
                total += opens_c[None, :] * (costs.open_at_5 * (h >= 5) + costs.open_at_9 * (h >= 9))
        with np.errstate(invalid="ignore"):
            new_win, moved = _window_move(win[:, None], pos_c[None, :], top_c[None, :])
        if any(costs.window):
            total += win_tab[np.where(np.isnan(moved), 25, np.minimum(moved, 24)).astype(np.intp)]
        ptr = total.argmin(axis=0)
        cols = np.arange(len(ptr))
        best = total[ptr, cols] + cost_c
        hand = np.where(np.isnan(pos_c), hand[ptr], pos_c)
        win = new_win[ptr, cols]
        back.append(ptr)
        prev = cur

    j = int(best.argmin())
    chosen = [None] * len(layers)
    for t in range(len(layers) - 1, -1, -1):
        chosen[t] = layers[t][j]
        if t > 0:
            j = int(back[t - 1][j])
    return groups, chosen


def fret(
    notes: Iterable[Any],
    tuning: Sequence[int] = STANDARD_TUNING,
    capo: int = 0,
    max_fret: int = MAX_FRET,
    costs: FretCosts | None = None,
    position: int | None = None,
    program: int | None = None,
) -> list[tuple[int, int]]:
    """One (string, fret) per note, in input order, minimising the fitted fingering cost (hand shifts, stretch,
    position height, string choice; see `fingering_features`).

    `notes`: (onset_tick, duration_tick, pitch) tuples or objects with .time/.duration/.pitch (symusic notes).
    Notes with the same onset form a chord and get distinct strings. Returns `UNPLAYABLE` (-1, -1) for a
    note that cannot be played (see the module docstring). Frets are relative to the capo.
    `position`: play in this position if the notes allow (the index finger at that fret, the hand covering it and
    the next three; 0 = open position): every fret outside that window costs `POSITION_WEIGHT`, and so does an
    open string above position 4. None: the fitted costs choose.
    `costs`: the fingering costs; None: `costs_for_program(program)` (the track's General MIDI program: a
    distorted guitar's riffs are fingered as rock guitarists play them, anything else with the default costs).
    """
    costs = costs_for_program(program) if costs is None else costs
    notes_t = [_note_tuple(n) for n in notes]
    nn = _nn_costs(notes_t, tuning, capo, max_fret, costs, _nn_model(costs))  # the learned term, in every pass
    if position is not None and notes_t:
        away = _position_costs(notes_t, tuning, capo, max_fret, position)
        nn = away if nn is None else nn + away
    if not any(costs.piece[:_N_FROM_FIRST]):
        return _one_pass(notes_t, tuning, capo, max_fret, costs, nn)
    piece = _piece_table(notes_t, tuning, capo, max_fret, _one_pass(notes_t, tuning, capo, max_fret, costs.first(), nn))
    return _frets_of(notes_t, *_decode(notes_t, tuning, capo, max_fret, costs, piece=piece, nn=nn), len(tuning))


POSITION_WEIGHT = 3.0  # per fret outside the requested position's window (fret(position=...))


def _position_costs(notes_t, tuning, capo, max_fret, position: int) -> np.ndarray:
    """POSITION_WEIGHT x frets outside the window [p, p + 3] (p = max(position, 1)) per (note, string index; last
    column 0: unplayable); an open string counts 0 up to position 4 and 1 above."""
    n = len(tuning)
    lo = max(int(position), 1)
    pitch = np.array([x[2] for x in notes_t], dtype=float)
    f = pitch[:, None] - (np.asarray(tuning, dtype=float)[None, :] + capo)
    away = np.maximum(lo - f, 0) + np.maximum(f - (lo + 3), 0)
    away = np.where(f == 0, float(position > 4), away)
    out = np.zeros((len(notes_t), n + 1))
    out[:, :n] = POSITION_WEIGHT * np.where((f >= 0) & (f <= max_fret - capo), away, 0.0)
    return out


def _one_pass(notes_t, tuning, capo, max_fret, costs, nn=None) -> list[tuple[int, int]]:
    """Decode with the pitch-only piece features (none when their weights are 0) and the learned term `nn`."""
    piece = _piece_table(notes_t, tuning, capo, max_fret, None) if any(costs.piece) else None
    return _frets_of(notes_t, *_decode(notes_t, tuning, capo, max_fret, costs, piece=piece, nn=nn), len(tuning))


def piece_table(notes: Iterable[Any], tuning: Sequence[int] = STANDARD_TUNING, capo: int = 0,
                max_fret: int = MAX_FRET, costs: FretCosts = DEFAULT_COSTS) -> np.ndarray:
    """Run the first pass (`costs.first()`) and return its piece-level feature table, (notes, strings, _N_PIECE)
    with strings indexed from the lowest: what the second pass of `fret()` adds to the cost (`costs.piece`)."""
    notes_t = [_note_tuple(n) for n in notes]
    first = costs.first()
    nn = _nn_costs(notes_t, tuning, capo, max_fret, first, _nn_model(first))
    return _piece_table(notes_t, tuning, capo, max_fret, _one_pass(notes_t, tuning, capo, max_fret, first, nn))


def _frets_of(notes_t, groups, chosen, n_strings: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes_t)
    for g, cand in zip(groups, chosen):
        for k, i in enumerate(g):
            s, f = cand.assign[k]
            out[i] = UNPLAYABLE if s < 0 else (n_strings - s, f)
    return out


def fingering_features(
    notes: Iterable[Any], frets: Sequence[tuple[int, int]], tuning: Sequence[int] = STANDARD_TUNING,
    piece: np.ndarray | None = None,
) -> np.ndarray:
    """Feature counts of one fingering (`frets`: (string, fret) per note, as `fret()` returns) such that `fret()`
    minimises `FretCosts.vector() @ fingering_features(..., piece=piece_table(...))` (plus the fixed
    `dropped`/`impossible` costs). Without `piece` the piece-level (second-pass) features are 0.
    The reference the fast Viterbi is tested against, and what fitting the weights uses."""
    notes_t = [_note_tuple(n) for n in notes]
    n_strings = len(tuning)
    acc = np.zeros(N_FEATURES)
    if piece is not None:
        for i, (s, _) in enumerate(frets):
            if s >= 1:
                acc[_PIECE0:] += piece[i, n_strings - s]
    hand = None
    win = math.nan
    prev = None  # (group, assign, mean string)
    for g in _group_onsets(notes_t):
        assign = tuple(UNPLAYABLE if frets[i][0] < 0 else (n_strings - frets[i][0], frets[i][1]) for i in g)
        _chord_features(assign, n_strings, acc)
        played = [(s, f) for s, f in assign if s >= 0]
        fretted = [f for _, f in played if f > 0]
        pos = min(fretted) if fretted else None
        ms = sum(s for s, _ in played) / len(played) if played else None
        onset = notes_t[g[0]][0]
        if prev is not None:
            pg, pa, pms = prev
            ends = [notes_t[i][0] + notes_t[i][1] for i in pg]
            if hand is not None and pos is not None:
                d = min(abs(hand - pos), 24)
                acc[_MOVE0 + _MOVE_BIN[d]] += 1
                if max(ends) < onset:
                    acc[_MOVE_REST] += min(d, 12)
            if pms is not None and ms is not None:
                acc[_JUMP] += abs(pms - ms)
            if len(pg) == 1 and len(g) == 1 and pa[0][0] >= 0 and assign[0][0] >= 0:
                ds = assign[0][0] - pa[0][0]
                if ds * (notes_t[g[0]][2] - notes_t[pg[0]][2]) < 0:
                    acc[_CONTRARY] += 1
                if ds == 0:
                    acc[_SAME] += 1
                    acc[_SLIDE] += abs(assign[0][1] - pa[0][1])
            used = {s for s, _ in played}
            acc[_CUT] += sum(1 for k, e in enumerate(ends) if e > onset and pa[k][0] >= 0 and pa[k][0] in used)
            h = pos if pos is not None else hand
            if h is not None:
                n_open = sum(1 for _, f in played if f == 0)
                acc[_OPEN5] += n_open * (h >= 5)
                acc[_OPEN9] += n_open * (h >= 9)
        if pos is not None:
            new, moved = _window_move(np.float64(win), np.float64(pos), np.float64(max(fretted)))
            if not math.isnan(moved):
                acc[_WIN0 + _WIN_BIN[min(int(moved), 24)]] += 1
            win = float(new)
            hand = pos
        prev = (g, assign, ms)
    return acc


def fret_lowest(
    notes: Iterable[Any], tuning: Sequence[int] = STANDARD_TUNING, capo: int = 0, max_fret: int = MAX_FRET
) -> list[tuple[int, int]]:
    """Baseline: each chord gets the distinct-string assignment with the smallest sum of frets (lowest-fret rule)."""
    notes_t = [_note_tuple(n) for n in notes]
    n_strings = len(tuning)
    opens = [p + capo for p in tuning]
    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes_t)

    def cost(a):
        return sum(1000 if s < 0 else f for s, f in a)

    for g in _group_onsets(notes_t):
        st = _chord_cands([notes_t[i][2] for i in g], opens, max_fret - capo, cost, 1)[0]
        for k, i in enumerate(g):
            s, f = st.assign[k]
            out[i] = UNPLAYABLE if s < 0 else (n_strings - s, f)
    return out


# ---------------------------------------------------------------------------------------------------
# Rendering

_PITCH_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
_GRIDS = (1, 2, 4, 8)  # tab columns per quarter note, coarsest first


def string_labels(tuning: Sequence[int]) -> list[str]:
    """Tab line labels, highest string first: standard tuning gives e B G D A E."""
    names = [_PITCH_NAMES[p % 12] for p in tuning]
    if len(names) > 1 and names[-1] == names[0]:
        names[-1] = names[-1].lower()  # the usual 'e' for the high E string
    return names[::-1]


def _bars(score, end: int) -> list[tuple[int, int]]:
    """(start, length) in ticks of every bar up to `end`, from the score's time signatures (4/4 without)."""
    tpq = score.ticks_per_quarter
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures) or [(0, 4, 4)]
    if sigs[0][0] > 0:
        sigs.insert(0, (0, 4, 4))
    bars, t, k = [], 0, 0
    while t < end or not bars:
        while k + 1 < len(sigs) and sigs[k + 1][0] <= t:
            k += 1
        length = max(1, sigs[k][1] * tpq * 4 // sigs[k][2])
        bars.append((t, length))
        t += length
    return bars


def _resolve_frets(gs, frets) -> list[tuple[int, int]]:
    if frets is None:
        frets = gs.frets
    if frets is None:
        frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
    if len(frets) != len(gs.track.notes):
        raise ValueError(f"{len(frets)} frets for {len(gs.track.notes)} notes")
    return list(frets)


def render_ascii_tab(gs, frets=None, width: int = 80) -> str:
    """The part as a plain-text tab: one line per string (labels from the tuning), bar lines from the time
    signatures, one column per grid step (the coarsest of 1/4..1/32 that holds the onsets), wrapped at `width`.
    `frets` defaults to gs.frets, else to `fret()`; unplayable notes are left out."""
    frets = _resolve_frets(gs, frets)
    notes = gs.track.notes
    tpq = gs.score.ticks_per_quarter
    n = len(gs.tuning)
    onsets = [int(x.time) for x in notes]
    per_q = next((g for g in _GRIDS if all((t * g) % tpq == 0 for t in onsets)), _GRIDS[-1])
    step = tpq / per_q  # ticks per column slot
    end = max((x.time + 1 for x in notes), default=1)
    bars = _bars(gs.score, end)

    # cells[bar][slot][string_index 0 = highest] = fret text
    cells: list[dict[int, dict[int, str]]] = [dict() for _ in bars]
    starts = [b[0] for b in bars]
    for x, (s, f) in zip(notes, frets):
        if f < 0 or not 1 <= s <= n:
            continue
        b = bisect.bisect_right(starts, x.time) - 1
        slot = round((x.time - starts[b]) / step)
        col = cells[b].setdefault(slot, {})
        while (s - 1) in col:  # two onsets rounded to one slot: push the later one right
            slot += 1
            col = cells[b].setdefault(slot, {})
        col[s - 1] = str(f)

    # Every slot is equally wide (one dash more than the widest fret) so column position is time.
    w = 1 + max((len(t) for bar in cells for col in bar.values() for t in col.values()), default=1)

    def bar_text(b: int) -> list[str]:
        n_slots = max(1, round(bars[b][1] / step), max(cells[b], default=0) + 1)
        lines = [["-"] for _ in range(n)]
        for slot in range(n_slots):
            col = cells[b].get(slot, {})
            for i in range(n):
                t = col.get(i, "")
                lines[i].append(t + "-" * (w - len(t)))
        return ["".join(x) for x in lines]

    labels = string_labels(gs.tuning)
    lw = max(len(x) for x in labels)
    header = []
    if gs.name:
        header.append(gs.name)
    header.append("Tuning: " + " ".join(labels[::-1]))
    if gs.capo:
        header.append(f"Capo: {gs.capo}")
    qpm = gs.score.tempos[0].qpm if len(gs.score.tempos) else 120.0
    header.append(f"Tempo: {qpm:g}   (one tab column = 1/{per_q * 4} note)")

    staves, cur = [], [""] * n
    for b in range(len(bars)):
        bt = bar_text(b)
        if cur[0] and lw + 1 + len(cur[0]) + len(bt[0]) + 1 > width:
            staves.append(cur)
            cur = [""] * n
        cur = [c + t + "|" for c, t in zip(cur, bt)]
    staves.append(cur)
    out = header + [""]
    for st in staves:
        out += [f"{labels[i]:<{lw}}|{st[i]}" for i in range(n)] + [""]
    return "\n".join(out)


def write_ascii_tab(gs, path, frets=None, width: int = 80) -> None:
    """Write `render_ascii_tab(gs)` to `path`."""
    from pathlib import Path

    Path(path).write_text(render_ascii_tab(gs, frets, width), encoding="utf-8")


# Guitar Pro durations (ticks at 960 per quarter), longest first: (ticks, value, dotted).
_GP_Q = 960
_GP_DURATIONS = [
    (int(_GP_Q * 4 / v * (1.5 if d else 1)), v, d) for v in (1, 2, 4, 8, 16, 32, 64) for d in (True, False)
]
_GP_DURATIONS.sort(key=lambda x: -x[0])
_GP_GRID = _GP_Q // 16  # a 64th note: onsets are quantised to it


def _split_duration(ticks: int) -> list[tuple[int, int, bool]]:
    """Greedy decomposition of a gap into Guitar Pro durations (value, dotted)."""
    out = []
    while ticks >= _GP_GRID:
        t, v, d = next(x for x in _GP_DURATIONS if x[0] <= ticks)
        out.append((t, v, d))
        ticks -= t
    return out


def write_gp5(gs, path, frets=None) -> None:
    """Write the part as a one-track Guitar Pro 5 file (tuning, capo, tempo, time signatures, string/fret).

    Onsets are quantised to 64th notes; each onset is a beat lasting until the next onset (or the bar
    end), split into Guitar Pro durations with rests, so held notes that overlap later onsets are
    shortened. Unplayable notes and a second note on an already used string at one onset are left out.
    """
    import guitarpro as gp

    frets = _resolve_frets(gs, frets)
    notes = gs.track.notes
    tpq = gs.score.ticks_per_quarter
    n_str = len(gs.tuning)

    def q(t: int) -> int:
        return round(t * _GP_Q / tpq / _GP_GRID) * _GP_GRID

    end_src = max((x.time + x.duration for x in notes), default=1)
    bars = _bars(gs.score, end_src)

    song = gp.models.Song()
    song.title = gs.name or ""
    song.tempo = int(round(gs.score.tempos[0].qpm)) if len(gs.score.tempos) else 120
    track = song.tracks[0]
    track.name = (gs.name or "Guitar")[:40]
    track.strings = [gp.models.GuitarString(i + 1, p) for i, p in enumerate(reversed(gs.tuning))]
    track.offset = gs.capo
    track.fretCount = MAX_FRET
    track.channel.instrument = int(gs.track.program) if not gs.track.is_drum else 25
    song.measureHeaders.clear()
    track.measures.clear()

    # Time signature per bar, from the source.
    ts_list = sorted((ts.time, ts.numerator, ts.denominator) for ts in gs.score.time_signatures) or [(0, 4, 4)]
    by_onset: dict[int, list[tuple[int, int, int]]] = {}
    for x, (s, f) in zip(notes, frets):
        if f >= 0 and 1 <= s <= n_str:
            by_onset.setdefault(q(x.time), []).append((s, f, int(x.velocity)))

    gp_start = _GP_Q  # GP's first measure starts at one quarter
    for k, (start, length) in enumerate(bars):
        num, den = 4, 4
        for t, nu, de in ts_list:
            if t <= start:
                num, den = nu, de
        header = gp.models.MeasureHeader(number=k + 1, start=gp_start)
        header.timeSignature.numerator = num
        header.timeSignature.denominator = gp.models.Duration(value=den)
        header.song = song
        song.measureHeaders.append(header)
        measure = gp.models.Measure(track, header)
        track.measures.append(measure)
        voice = measure.voices[0]

        b0, b1 = q(start), q(start) + header.length
        onsets = sorted(t for t in by_onset if b0 <= t < b1)
        points = onsets + [b1]
        if not onsets or onsets[0] > b0:
            points = [b0] + points  # leading rest
        for i in range(len(points) - 1):
            t, nxt = points[i], points[i + 1]
            parts = _split_duration(nxt - t)
            for j, (_, v, d) in enumerate(parts):
                beat = gp.models.Beat(voice, duration=gp.models.Duration(value=v, isDotted=d))
                if j == 0 and t in by_onset:
                    used = set()
                    for s, f, vel in by_onset[t]:
                        if s in used:
                            continue
                        used.add(s)
                        beat.notes.append(gp.models.Note(beat, value=f, string=s, velocity=vel, type=gp.NoteType.normal))
                    beat.status = gp.models.BeatStatus.normal
                else:
                    beat.status = gp.models.BeatStatus.rest
                voice.beats.append(beat)
        gp_start += header.length
    gp.write(song, str(path), version=(5, 1, 0))
