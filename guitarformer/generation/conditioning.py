"""What a riff is asked to be: the `sample` options as tokens the model was trained with.

A run whose dataset was prepared with controls (data.controls, data/controls.py) learned the piece controls right
after BOS and the bar controls right after every Bar, each dropped at random. Asking for a riff is writing them:
the prompt is ``BOS <piece controls> Bar <bar controls> <meter>``, and the sampler's constraint forces the same
bar controls after every Bar the model writes (GuitarConstraint's `bar_controls`). Tempo and time signature are
REMI's own tokens (``TimeSig_7/8``, ``Position_0 Tempo_140``) opening the first bar; the time signature carries on
as REMI carries it, the tempo too.

Values a run never learned are rejected with the list of the values it knows (its tokenizer.json records the
controls and their styles); a control option for a run without controls names the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from guitarformer.data.controls import (
    meter_tokens,
    position_frets,
    position_value,
    prompt_tokens,
    tuning_name,
)
from guitarformer.data.tab_tokens import has_controls
from guitarformer.data.tokenization import bar_ids
from guitarformer.errors import GuitarformerError

# Sampling options that only a run with controls can honour: option name -> control name (data/controls.py).
CONTROL_OPTIONS = {"key": "key", "density": "density", "polyphony": "poly", "palm_mute": "pm", "techniques": "tech",
                   "style": "style", "hand_position": "pos"}
NO_CONTROLS_FIX = ("prepare the dataset with controls and train on it: guitarformer prepare DIR --set "
                   "data.controls=true, then guitarformer train --data <dataset> (the built-in corpus: guitarformer "
                   "train --set data.controls=true)")


@dataclass
class Conditions:
    """Token ids that ask for a riff: `piece` after BOS, `bar` after every Bar, `meter` opening the first bar;
    `region` the (lowest, highest) fret of an asked hand position, which the sampler holds every note to."""

    piece: list[int] = field(default_factory=list)
    bar: list[int] = field(default_factory=list)
    meter: list[int] = field(default_factory=list)
    region: tuple[int, int] | None = None

    def __bool__(self) -> bool:
        return bool(self.piece or self.bar or self.meter)


def option_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def conditions(tokenizer, tuning: tuple[int, ...] | None = None, tempo: float | None = None,
               time_signature: str | None = None, hand_position: int | None = None,
               **controls: Any) -> Conditions | None:
    """The ids that ask `tokenizer`'s model for these options (`controls`: CONTROL_OPTIONS keys, None = not asked).

    With controls in the run, `tuning` becomes the tuning control, `hand_position` (a fret) the hand-position bin
    and `tempo` a Tempo token; without, tuning and tempo stay what they were before controls (the written tuning
    and tempo), a hand position is refused like every control, and None is returned when nothing else is asked.
    `time_signature` ("7/8") needs Bar and TimeSig tokens (REMI, TabREMI), with or without controls."""
    unknown = set(controls) - set(CONTROL_OPTIONS)
    if unknown:
        raise TypeError(f"unknown control options {sorted(unknown)}")
    asked = {k: v for k, v in controls.items() if v is not None}
    if hand_position is not None:
        asked["hand_position"] = hand_position
    bars = bar_ids(tokenizer)
    if time_signature is not None and (not bars or not any(t.startswith("TimeSig_") for t in tokenizer.vocab)):
        raise GuitarformerError(f"this run's tokens ({type(tokenizer).__name__}) cannot open a bar in a time "
                                "signature", "sample without --time-signature, or use a run trained with TabREMI or "
                                "REMI tokens")
    if not has_controls(tokenizer):
        if asked:
            flags = ", ".join(option_flag(k) for k in asked)
            raise GuitarformerError(f"this run was trained without control tokens, so it cannot be asked for {flags}",
                                    NO_CONTROLS_FIX + (" (--position re-fingers the tab of any run)"
                                                       if hand_position is not None else ""))
        if time_signature is None:
            return None
        return Conditions(meter=meter_tokens(tokenizer.vocab, time_signature))
    named = {CONTROL_OPTIONS[k]: v for k, v in asked.items()}
    if tuning is not None:
        named["tuning"] = tuning_name(tuning)
    if hand_position is not None:
        named["pos"] = hand_position
    if "style" in named and not any(t.startswith("CtrlStyle_") for t in tokenizer.vocab):
        raise GuitarformerError("--style: this run learned no styles (its files sat in no style folders)",
                                "sample without --style, or prepare a folder whose subfolders name the styles "
                                "(my-tabs/metal/..., my-tabs/folk/...) with --set data.controls=true and train on it")
    try:
        piece, bar = prompt_tokens(tokenizer.vocab, **named)
    except GuitarformerError as e:  # name the option as the user typed it
        for opt, ctrl in (*CONTROL_OPTIONS.items(), ("tuning", "tuning")):
            if e.problem.startswith(ctrl + " ") or f" {ctrl} controls" in e.problem:
                raise GuitarformerError(f"{option_flag(opt)}: {e.problem}", e.fix) from None
        raise
    region = position_frets(position_value(hand_position)) if hand_position is not None else None
    return Conditions(piece, bar, meter_tokens(tokenizer.vocab, time_signature, tempo), region)
