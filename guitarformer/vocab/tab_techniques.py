"""Playing techniques as tokens: the per-note `Technique` record <-> ``Bend_<quarter tones>`` and ``Tech_*``.

In a fixed order: ``Bend_<quarter tones>`` (the bend's peak, 1-8) with ``Tech_Release`` when it comes back down,
then ``Tech_*`` for slides (SlideInBelow, SlideInAbove, SlideShift, SlideLegato, SlideOutDown, SlideOutUp),
Hammer, PalmMute, Dead, Ghost, Vibrato, LetRing, Tap, harmonics (HarmNatural, HarmArtificial, HarmPinch, HarmTap,
HarmSemi, HarmFeedback). A bend comes back as its shape's summary (peak at mid-note, release to the fretted
pitch at the end), which is what tab writes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from guitarformer.music.score import PLAIN, Technique

MAX_BEND_QUARTER_TONES = 8  # two whole steps: the most a guitar string bends

# Flag fields of Technique and their Tech_ values, in token order.
_FLAGS = (("hammer", "Hammer"), ("palm_mute", "PalmMute"), ("dead", "Dead"), ("ghost", "Ghost"),
          ("vibrato", "Vibrato"), ("let_ring", "LetRing"), ("tap", "Tap"))
_SLIDE_IN = {"below": "SlideInBelow", "above": "SlideInAbove"}
_SLIDE_OUT = {"shift": "SlideShift", "legato": "SlideLegato", "down": "SlideOutDown", "up": "SlideOutUp"}
_HARMONIC = {"natural": "HarmNatural", "artificial": "HarmArtificial", "pinch": "HarmPinch", "tap": "HarmTap",
             "semi": "HarmSemi", "feedback": "HarmFeedback"}
TECH_VALUES = ("Release", *_SLIDE_IN.values(), *_SLIDE_OUT.values(), *(v for _, v in _FLAGS), *_HARMONIC.values())
_FROM_TECH = {v: ("slide_in", k) for k, v in _SLIDE_IN.items()} | {v: ("slide_out", k) for k, v in _SLIDE_OUT.items()} \
    | {v: ("harmonic", k) for k, v in _HARMONIC.items()} | {v: (f, True) for f, v in _FLAGS}


def technique_tokens(t: Technique) -> list[str]:
    """The tokens of one note's techniques, in the fixed order (none for a plain note)."""
    if not t:
        return []
    out = []
    if t.bend:
        peak = max(a for _, a in t.bend)
        if peak > 0:
            out.append(f"Bend_{min(MAX_BEND_QUARTER_TONES, max(1, round(peak)))}")
            if t.release:
                out.append("Tech_Release")
    if t.slide_in in _SLIDE_IN:
        out.append(f"Tech_{_SLIDE_IN[t.slide_in]}")
    if t.slide_out in _SLIDE_OUT:
        out.append(f"Tech_{_SLIDE_OUT[t.slide_out]}")
    out += [f"Tech_{v}" for f, v in _FLAGS if getattr(t, f)]
    if t.harmonic in _HARMONIC:
        out.append(f"Tech_{_HARMONIC[t.harmonic]}")
    return out


def technique_of(tokens: list[str]) -> Technique:
    """The Technique a note's technique tokens describe (inverse of `technique_tokens` up to the bend's shape)."""
    fields: dict[str, Any] = {}
    peak, release = 0, False
    for token in tokens:
        kind, value = token.split("_", 1)
        if kind == "Bend":
            peak = int(value)
        elif value == "Release":
            release = True
        elif value in _FROM_TECH:
            name, v = _FROM_TECH[value]
            fields[name] = v
    if peak:
        fields["bend"] = ((0.0, 0.0), (0.5, float(peak)), (1.0, 0.0)) if release else ((0.0, 0.0), (0.5, float(peak)))
    return replace(PLAIN, **fields) if fields else PLAIN


def canonical(t: Technique) -> Technique:
    """A Technique as the tokens can hold it (bend shape summarised): what a round trip must give back."""
    return technique_of(technique_tokens(t))
