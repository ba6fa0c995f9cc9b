"""What a riff is asked to be: the `sample` options as tokens the model was trained with, per bar where asked.

A run whose dataset was prepared with controls (data.controls, vocab/controls.py) learned the piece controls right
after BOS and the bar controls right after every Bar, each dropped at random. Asking for a riff is writing them:
the prompt is ``BOS <piece controls> Bar <bar 1's controls> <meter>``, and the sampler's constraint forces each
bar's own controls after its Bar (GuitarConstraint's `bar_controls`, a schedule). Bar options take one value for
every bar or a value per bar range (``--density 1-4:low,5-8:high``: bars past the last range get no density
asked). Tempo and time signature are REMI's own tokens (``TimeSig_7/8``, ``Position_0 Tempo_140``) opening the
first bar; the time signature carries on as REMI carries it, the tempo too.

Honest controls: a value the run never learned is refused with the values it knows. What it learned is what its
training data held (vocab/seen.py: `Seen`, a value seen at least MIN_SEEN times), not merely its vocabulary; a
control option for a run without controls names the fix. The hand position is held by the sampler (the string
state's region, or the guards per bar), so every position works. With `guard` (the default) the sampler steers
what the model alone does not hold (generation/constraint/guards.py): the key, each bar's density, a style's usual meter.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from guitarformer.vocab.controls import (
    BAR,
    Controls,
    control,
    meter_tokens,
    option_controls,
    position_frets,
    prompt_tokens,
    tuning_name,
)
from guitarformer.vocab.seen import Seen
from guitarformer.vocab.tab_tokens import has_controls
from guitarformer.vocab.tokenization import bar_ids
from guitarformer.errors import GuitarformerError
from guitarformer.generation.constraint.guards import GuardSpec, implied_meter

NO_CONTROLS_FIX = ("prepare the dataset with controls and train on it: guitarformer prepare DIR --set "
                   "data.controls=true, then guitarformer train --data <dataset> (the built-in corpus: guitarformer "
                   "train --set data.controls=true)")
# A fine-tune needs the data tokenized as the shipped model's was (training/init.py refuses anything else).
TRAIN_ON_YOURS = ("guitarformer prepare my-tabs --like pretrained, then guitarformer train --data <that dataset> "
                  "--init pretrained")
UNSEEN_FIX = "or train a model on tabs that have it: " + TRAIN_ON_YOURS
# What teaches a technique: tabs that mark it, as Guitar Pro files and ASCII tabs do (MIDI and LilyPond renders,
# the built-in corpus's sources, mark none but palm mutes)
TECH_FIX = ("or teach it: Guitar Pro files or ASCII tabs that mark bends, slides, hammer-ons and the like (prepare "
            "a folder of them with --like pretrained, then guitarformer train --data <that dataset> --init pretrained)")
_NOT_CONTROLS = {"tuning": "Tuning", "time_signature": "TimeSig"}  # options counted like controls (vocab/seen.py)
_RANGE = re.compile(r"(\d+)(?:\s*-\s*(\d+))?\s*:\s*(.+)")  # one stripped part; no two blank runs side by side


@dataclass
class Conditions:
    """Token ids that ask for a riff: `piece` after BOS, `bar` after the first new bar's Bar, `meter` opening the
    first bar; `schedule` each new bar's controls (the last entry for every bar past it; None: `bar` for all);
    `region` the (lowest, highest) fret of a hand position asked for every bar, which the sampler holds every note
    to; `guard` what the sampler's guards hold (None: off)."""

    piece: list[int] = field(default_factory=list)
    bar: list[int] = field(default_factory=list)
    meter: list[int] = field(default_factory=list)
    region: tuple[int, int] | None = None
    schedule: list[list[int]] | None = None
    guard: GuardSpec | None = None

    def __bool__(self) -> bool:
        return bool(self.piece or self.bar or self.meter or self.schedule)

    def bar_controls(self) -> list[list[int]]:
        """The constraint's schedule: one list of ids per new bar."""
        return self.schedule if self.schedule is not None else [self.bar]


def option_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def parse_per_bar(option: str, value: Any, per_bar: bool = True) -> list[tuple[int, int | None, Any]]:
    """A bar option's value as (first bar, last bar or None for every bar on, value) ranges, bars from 1:
    "high" -> [(1, None, "high")]; "1-4:low,5-8:high" -> [(1, 4, "low"), (5, 8, "high")]; "9:7" -> [(9, 9, "7")].
    `per_bar` False (a piece control's option): one value for every bar."""
    if not isinstance(value, str) or ":" not in value or not per_bar:
        return [(1, None, value)]
    out: list[tuple[int, int | None, Any]] = []
    for part in value.split(","):
        m = _RANGE.fullmatch(part.strip())
        if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise GuitarformerError(f"{option_flag(option)} {value!r}: {part.strip()!r} is not BARS:VALUE",
                                    f"write bar ranges like {option_flag(option)} 1-4:low,5-8:high (bars from 1)")
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if any(a <= last and first <= b for a, b, _ in out):
            raise GuitarformerError(f"{option_flag(option)} {value!r}: bars {first}-{last} are asked twice",
                                    "give each bar one value")
        out.append((first, last, m.group(3)))
    return out


def _value_at(ranges: list[tuple[int, int | None, Any]], bar: int) -> Any:
    """The value asked for new bar `bar` (from 1), None where no range covers it."""
    return next((v for a, b, v in ranges if a <= bar and (b is None or bar <= b)), None)


def _name(option: str) -> str:
    """The name an option's values are counted under: its control's (vocab/controls.py), or Tuning / TimeSig."""
    ctrl = option_controls().get(option)
    return ctrl.name if ctrl is not None else _NOT_CONTROLS.get(option, option)


def _unseen(option: str, value: str, seen: Seen, unit: str) -> GuitarformerError:
    name = _name(option)
    known = seen.known(name)
    n, total = seen.count(name, value), seen.total(name)
    had = f"in only {n} of its {total:,} {unit}" if n else f"in none of its {total:,} {unit}"
    return GuitarformerError(f"{option_flag(option)} {value}: this model never learned it: {value} occurs {had} "
                             f"({seen.source})", f"use one of: {', '.join(known) or '(none)'}; "
                             + (TECH_FIX if name == "Tech" else UNSEEN_FIX))


def check_seen(seen: Seen | None, asked: dict[str, Any], tuning: tuple[int, ...] | None,
               time_signature: str | None, tempo: float | None) -> None:
    """Refuse what the run's training data never held (values already normalised: "E:minor", "chords", ...)."""
    if seen is None:
        return
    for option, value in asked.items():
        ctrl = option_controls()[option]
        if not seen.counts.get(ctrl.name):  # no counts: no check
            continue
        if value not in ctrl.offered(seen):  # (every hand position: the sampler holds it)
            raise _unseen(option, value, seen, "bars" if ctrl.scope == BAR else "pieces")
    if tuning is not None and seen.counts.get("Tuning"):
        name = tuning_name(tuning)
        if name not in seen.known("Tuning"):
            raise GuitarformerError(
                f"--tuning {name}: this model never played in {name} ({seen.source} is all in "
                f"{', '.join(seen.known('Tuning'))}), so it would only relabel riffs written for that tuning",
                f"leave out --tuning, or train a model on tabs in {name}: {TRAIN_ON_YOURS}")
    if time_signature is not None and seen.counts.get("TimeSig") and time_signature not in seen.known("TimeSig"):
        raise _unseen("time_signature", time_signature, seen, "bars")
    if tempo is not None and seen.tempo is not None and not seen.tempo[0] - 0.5 <= tempo <= seen.tempo[1] + 0.5:
        lo, hi = seen.tempo
        raise GuitarformerError(f"--tempo {tempo:g}: this model's training data has tempos {lo:g}-{hi:g} BPM only "
                                f"({seen.source})", f"ask a tempo in {math.ceil(lo)}-{math.floor(hi)}")


def conditions(tokenizer, tuning: tuple[int, ...] | None = None, tempo: float | None = None,
               time_signature: str | None = None, *, seen: Seen | None = None, guard: bool | GuardSpec = True,
               continuing: bool = False, **controls: Any) -> Conditions | None:
    """The ids that ask `tokenizer`'s model for these options (`controls`: the options of the registered controls,
    vocab/controls.py `option_controls`, None = not asked; the bar controls' options also per bar range:
    "1-4:low,5-8:high").

    With controls in the run, `tuning` becomes the tuning control, `hand_position` (a fret) the hand-position bin
    and `tempo` a Tempo token; without, tuning and tempo stay what they were before controls (the written tuning
    and tempo), a hand position is refused like every control, and None is returned when nothing else is asked.
    `time_signature` ("7/8") needs Bar and TimeSig tokens (REMI, TabREMI), with or without controls. `seen`: what
    the run's training data held (values it never learned are refused); `guard`: steer key and density in the
    sampler and, unless `continuing` a file, give a style its usual meter where no time signature is asked (a
    GuardSpec: on, with its key guard's strengths)."""
    asked = Controls(**controls).asked()
    settings = guard if isinstance(guard, GuardSpec) else GuardSpec()
    guard = bool(guard) if not isinstance(guard, GuardSpec) else True
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
                                                       if "hand_position" in asked else ""))
        check_seen(seen, {}, None, time_signature, tempo)
        if time_signature is None:
            return None
        return Conditions(meter=meter_tokens(tokenizer.vocab, time_signature))
    if "style" in asked and not any(t.startswith("CtrlStyle_") for t in tokenizer.vocab):
        raise GuitarformerError("--style: this run learned no styles (its files sat in no style folders)",
                                "sample without --style, or prepare a folder whose subfolders name the styles "
                                "(my-tabs/metal/..., my-tabs/folk/...) with --set data.controls=true and train on it")
    opts = option_controls()
    ranges = {k: [(a, b, opts[k].from_option(v)) for a, b, v in parse_per_bar(k, v, opts[k].scope == BAR)]
              for k, v in asked.items()}
    for k, rs in ranges.items():
        for _, _, v in rs:
            check_seen(seen, {k: v}, None, None, None)
    check_seen(seen, {}, tuning, time_signature, tempo)
    style = ranges["style"][0][2] if "style" in ranges else None
    if guard and not continuing and time_signature is None:
        meter = implied_meter(seen, style)
        time_signature = meter if meter and f"TimeSig_{meter}" in tokenizer.vocab else None
    last = max([b for rs in ranges.values() for _, b, _ in rs if b is not None], default=0)
    try:
        piece, _ = prompt_tokens(tokenizer.vocab, tuning=tuning_name(tuning) if tuning is not None else None,
                                 **{opts[k].name: rs[0][2] for k, rs in ranges.items() if opts[k].scope != BAR})
        per_bar = [prompt_tokens(tokenizer.vocab, **{opts[k].name: _value_at(rs, n) for k, rs in ranges.items()
                                                     if opts[k].scope == BAR})[1] for n in range(1, last + 2)]
    except GuitarformerError as e:  # name the option as the user typed it
        for opt, ctrl in (*((o, c.name.lower()) for o, c in opts.items()), ("tuning", "tuning")):
            if e.problem.startswith(ctrl + " ") or f" {ctrl} controls" in e.problem:
                raise GuitarformerError(f"{option_flag(opt)}: {e.problem}", e.fix) from None
        raise
    positions = ranges.get("hand_position")
    plain = positions is not None and positions[0][1] is None
    region = position_frets(positions[0][2]) if plain else None
    spec = replace(settings, key=ranges["key"][0][2] if guard and "key" in ranges else None, density=[], regions=[],
                   palm_mute=[], polyphony=[])
    if guard and "density" in ranges:
        spec.density = [_value_at(ranges["density"], n) for n in range(1, last + 2)]
    if guard and "polyphony" in ranges:
        spec.polyphony = [_value_at(ranges["polyphony"], n) for n in range(1, last + 2)]
    if guard and "palm_mute" in ranges:
        spec.palm_mute = [_value_at(ranges["palm_mute"], n) for n in range(1, last + 2)]
    if positions is not None and not plain:  # a hand position per bar: held by the guards, whatever `guard` says
        spec.regions = [None if (v := _value_at(positions, n)) is None else position_frets(v)
                        for n in range(1, last + 2)]
    return Conditions(piece, per_bar[0], meter_tokens(tokenizer.vocab, time_signature, tempo), region,
                      per_bar if last else None, spec if spec else None)
