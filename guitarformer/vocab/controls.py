"""Control values: what a piece and each of its bars are like, computed from the notes alone.

A model trained with these values as tokens (TabREMI with controls, vocab/tab_tokens.py) can be asked for them;
the same functions then score the notes it wrote (control adherence), so everything here reads plain notes
(`PlayedNote`: onset, duration, pitch, string, fret, technique) plus ticks per quarter and time signatures, never
tokens or files.

Piece controls, one value per piece:
  Tuning  a name of music.guitar.TUNINGS, else "other";  Capo  0..12;
  Key     "E:minor": the Krumhansl-Kessler key profile that best correlates with the piece's duration-weighted
          pitch classes (sources often leave the key signature at its default, and generated notes have none,
          so the key is always estimated, the same way for training data and for samples);
  Style   given by the caller (by default the dataset's folder name), cleaned to [a-z0-9-].
Bar controls, one value per bar that has notes (a bar without notes gets none):
  Density  music.texture.density (distinct onsets per quarter note): low / mid / high, split at
           DENSITY_THRESHOLDS, the tertiles of real tabs and the built-in corpus;
  Poly     music.texture.polyphony_class, the most common number of notes per onset, 1 / 2 / 3+: single / dyads /
           chords (a tie goes to the larger);
  Pos      the hand position, the median fret of the bar's fretted (non-open) notes: 0-4, 5-9, 10-14, 15+
           (all open strings: 0-4; no known fret: none);
  PM       the share of palm-muted notes: none (0), some (under half), most (half or more);
  Tech     the same share for every other technique (bends, slides, legato, vibrato, harmonics, dead and
           ghost notes, let ring, tapping).

As tokens each control is its own type, ``Ctrl<Name>_<value>`` (no underscore in a value, so MidiTok's
"Type_Value" split holds), and each type is dropped on its own at training time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from pathlib import Path
from statistics import median

import numpy as np

from guitarformer.errors import GuitarformerError
from guitarformer.music.bars import bar_index, bars
from guitarformer.music.guitar import MAX_FRET, PITCH_NAMES, TUNINGS
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.music.texture import density, polyphony_class

PREFIX = "Ctrl"
PIECE, BAR = "piece", "bar"  # a control's scope: one value per piece (after BOS) or per bar (after each Bar)

TUNING_VALUES = (*TUNINGS, "other")
MAX_CAPO = 12
CAPO_VALUES = tuple(str(c) for c in range(MAX_CAPO + 1))
KEY_VALUES = tuple(f"{n}:{mode}" for mode in ("major", "minor") for n in PITCH_NAMES)
DENSITY_VALUES = ("low", "mid", "high")
# Onsets per quarter note: low below the first, high from the second. benchmarks/measure_controls.py over 300 real
# files of the shared guitar data (19,992 bars) and 40 books of the built-in corpus (1,174 bars): pooled tertiles
# 1.5 and 2.0, but a fifth of all bars sit exactly on 2.0 (straight eighths), so the cut goes just above them:
# 33% low (under 1.5: quarter-note feel or sparser), 35% mid (about eighths), 32% high (busier than eighths).
DENSITY_THRESHOLDS = (1.5, 2.25)
POLY_VALUES = ("single", "dyads", "chords")
POS_VALUES = ("0-4", "5-9", "10-14", "15+")
SHARE_VALUES = ("none", "some", "most")  # palm mute and other techniques

# Krumhansl & Kessler's probe-tone ratings, tonic first.
MAJOR_PROFILE = np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88])
MINOR_PROFILE = np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17])


@dataclass(frozen=True)
class PlayedNote:
    """One note as the controls see it; fret -1 where no fret is known."""

    onset: int
    duration: int
    pitch: int
    string: int = 0
    fret: int = -1
    technique: Technique = PLAIN


def notes_of(gs: GuitarScore) -> list[PlayedNote]:
    """The notes of a guitar part, with its strings, frets and techniques where it has them."""
    notes = gs.track.notes
    frets = gs.frets if gs.frets is not None and len(gs.frets) == len(notes) else [(0, -1)] * len(notes)
    techs = gs.techniques if gs.techniques is not None and len(gs.techniques) == len(notes) else [PLAIN] * len(notes)
    return [PlayedNote(n.time, n.duration, n.pitch, s, f, t) for n, (s, f), t in zip(notes, frets, techs)]


# ---------------------------------------------------------------- piece controls


def tuning_name(tuning: Sequence[int]) -> str:
    """The name of a tuning in music.guitar.TUNINGS, or "other"."""
    t = tuple(tuning)
    return next((name for name, notes in TUNINGS.items() if notes == t), "other")


def capo_value(capo: int) -> str:
    return str(min(MAX_CAPO, max(0, int(capo))))


def estimate_key(notes: Iterable[PlayedNote]) -> str | None:
    """"E:minor": the major or minor key whose Krumhansl-Kessler profile best correlates with the
    duration-weighted pitch classes (dead notes left out); None without a pitched note."""
    hist = np.zeros(12)
    for n in notes:
        if not n.technique.dead:
            hist[n.pitch % 12] += max(1, n.duration)
    if not hist.any():
        return None
    best, name = -2.0, None
    for mode, profile in (("major", MAJOR_PROFILE), ("minor", MINOR_PROFILE)):
        for tonic in range(12):
            r = np.corrcoef(hist, np.roll(profile, tonic))[0, 1] if hist.std() > 0 else 0.0
            if r > best:
                best, name = r, f"{PITCH_NAMES[tonic]}:{mode}"
    return name


def style_name(style: str) -> str:
    """A style as a token value: lower case, runs of anything but letters and digits as one '-'."""
    s = re.sub(r"[^a-z0-9]+", "-", style.lower()).strip("-")
    if not s:
        raise GuitarformerError(f"style {style!r} has no letters or digits", "name a style like 'metal' or 'folk'")
    return s


def style_of(path: str | Path, root: str | Path) -> str | None:
    """The default style of a file under a dataset folder: the first folder below `root` that holds it
    (root/metal/x.gp5 -> "metal"); None for a file directly in `root` or outside it."""
    try:
        rel = Path(path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return None
    return style_name(rel.parts[0]) if len(rel.parts) > 1 and re.search(r"[A-Za-z0-9]", rel.parts[0]) else None


def piece_controls(notes: Sequence[PlayedNote], tuning: Sequence[int], capo: int = 0,
                   style: str | None = None, key: str | None = None) -> dict[str, str]:
    """The piece's control values, each registered piece control's `measure`: Tuning, Capo, Key (the given one, e.g.
    a tune's written K: field, else estimated from the notes; left out without notes), Style (where given)."""
    facts = PieceFacts(notes, tuple(tuning), capo, style, key)
    return {c.name: v for c in registered(PIECE) if (v := c.measure(facts)) is not None}


# ---------------------------------------------------------------- bar controls


def density_value(onsets_per_quarter: float) -> str:
    low, high = DENSITY_THRESHOLDS
    return "low" if onsets_per_quarter < low else "mid" if onsets_per_quarter < high else "high"


def position_value(fret: float) -> str:
    """The hand-position bin of a fret (CLI: --position 7 -> "5-9")."""
    return POS_VALUES[min(len(POS_VALUES) - 1, max(0, int(fret)) // 5)]


def position_frets(value: str, max_fret: int = MAX_FRET) -> tuple[int, int]:
    """The frets of a hand-position value: "5-9" -> (5, 9), "15+" -> (15, max_fret)."""
    lo, _, hi = value.rstrip("+").partition("-")
    return int(lo), int(hi) if hi else max_fret


def share_value(share: float) -> str:
    return "none" if share <= 0 else "some" if share < 0.5 else "most"


def _other_technique(t: Technique) -> bool:
    return bool(t) and t != Technique(palm_mute=True)


def bar_controls(notes: Sequence[PlayedNote], ticks_per_quarter: int, bar_ticks: int) -> dict[str, str]:
    """The control values of one bar `bar_ticks` long, from the notes that start in it ({} when none do): each
    registered bar control's `measure`."""
    if not notes:
        return {}
    facts = BarFacts(notes, ticks_per_quarter, bar_ticks)
    return {c.name: v for c in registered(BAR) if (v := c.measure(facts)) is not None}


def controls_per_bar(notes: Sequence[PlayedNote], ticks_per_quarter: int,
                     time_signatures: Sequence[tuple[int, int, int]]) -> list[dict[str, str]]:
    """Each bar's control values, notes assigned to the bar they start in. Bars are music.bars' (a signature inside
    a bar takes effect at the next bar line), so they are the bars of miditok's Bar tokens that the controls in a
    token sequence follow; each bar is as long as its meter, the last one too."""
    if not notes:
        return []
    spans = bars(time_signatures, ticks_per_quarter, max(n.onset for n in notes) + 1)
    starts = [start for start, *_ in spans]
    per_bar: list[list[PlayedNote]] = [[] for _ in spans]
    for n in notes:
        per_bar[bar_index(starts, n.onset)].append(n)
    return [bar_controls(ns, ticks_per_quarter, length) for ns, (_, length, _, _) in zip(per_bar, spans)]


# ---------------------------------------------------------------- the registry: one class per control


@dataclass(frozen=True)
class PieceFacts:
    """What a piece control is measured from: the notes, the part's tuning and capo, and what the caller knows (the
    style, by default the dataset's folder name; a written key)."""

    notes: Sequence[PlayedNote]
    tuning: tuple[int, ...]
    capo: int = 0
    style: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class BarFacts:
    """What a bar control is measured from: the notes that start in the bar (at least one) and its length."""

    notes: Sequence[PlayedNote]
    ticks_per_quarter: int
    bar_ticks: int


class Control:
    """One control: its token type (``Ctrl<name>_<value>``), scope (PIECE: one value after BOS; BAR: one after every
    Bar, and per bar ranges as a `sample` option), values, how it is measured from the notes, and how a user asks for
    it: the `sample` option, request field and studio form field `option` (None: not asked by name), its --help text,
    form label and input kind. Subclass it and `register` the subclass: the CLI, `Controls`, `run_info`, the studio
    form, the conditioning and the adherence measurement read the registry."""

    name: ClassVar[str]
    scope: ClassVar[str]
    option: ClassVar[str | None] = None
    label: ClassVar[str] = ""
    help: ClassVar[str] = ""
    field: ClassVar[str] = "text"  # the form's input: "text" or "int"
    values: ClassVar[tuple[str, ...]] = ()  # the token values; () where they come from the data (`vocabulary`)

    def vocabulary(self, styles: Sequence[str]) -> tuple[str, ...]:
        """The token values of a tokenizer whose dataset has these `styles`."""
        return self.values

    def measure(self, facts: PieceFacts | BarFacts) -> str | None:
        """The control's value for a piece (PieceFacts) or a bar (BarFacts); None: no value (no token)."""
        raise NotImplementedError

    def normalise(self, value: str | int) -> str:
        """A value as a user writes it, as a token value."""
        return str(value).strip().lower()

    def from_option(self, value: str | int) -> str:
        """The `sample` option's value as a token value (by default `normalise`)."""
        return self.normalise(value)

    def offered(self, seen: Any) -> list[str]:
        """The values a run offers (`run_info`): those its training data held (vocab/seen.py `Seen`)."""
        return seen.known(self.name)

    def form_field(self) -> dict[str, str]:
        """The studio's form field: {"name", "label", "input", "help"}."""
        return {"name": self.option or "", "label": self.label or self.name, "input": self.field, "help": self.help}


_REGISTRY: dict[str, Control] = {}


def register(cls: type[Control]) -> type[Control]:
    """Add a control (a class decorator); its name and option must be new."""
    if cls.scope not in (PIECE, BAR) or "_" in cls.name or not cls.name:
        raise ValueError(f"control {cls.__name__}: scope must be {PIECE!r} or {BAR!r}, name without '_'")
    taken = {c.option for c in _REGISTRY.values() if c.option}
    if cls.name in _REGISTRY or (cls.option and cls.option in taken):
        raise ValueError(f"control {cls.name} (option {cls.option}) is registered already")
    _REGISTRY[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    """Remove a registered control (a test's own)."""
    _REGISTRY.pop(name, None)


def registered(scope: str | None = None) -> tuple[Control, ...]:
    """The controls, piece controls first, each scope in registration order (the order of their tokens)."""
    return tuple(c for s in (PIECE, BAR) if scope in (None, s) for c in _REGISTRY.values() if c.scope == s)


def control_names(scope: str | None = None) -> tuple[str, ...]:
    """The registered controls' names, as `registered`."""
    return tuple(c.name for c in registered(scope))


def control(name: str) -> Control:
    """The registered control named `name` ("PM")."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise GuitarformerError(f"unknown control {name!r}", f"use one of {', '.join(control_names())}") from None


def option_controls() -> dict[str, Control]:
    """{option: control} of the controls a user asks for by name, in token order."""
    return {c.option: c for c in registered() if c.option}


@register
class Tuning(Control):
    name, scope, values = "Tuning", PIECE, TUNING_VALUES

    def measure(self, facts: PieceFacts) -> str:
        return tuning_name(facts.tuning)

    def normalise(self, value: str | int) -> str:
        return super().normalise(value).replace("_", "-").replace(" ", "-")


@register
class Capo(Control):
    name, scope, values = "Capo", PIECE, CAPO_VALUES

    def measure(self, facts: PieceFacts) -> str:
        return capo_value(facts.capo)


@register
class Key(Control):
    name, scope, values, option, label = "Key", PIECE, KEY_VALUES, "key", "Key"
    help = "Run with controls: the key, e.g. E:minor, 'A major', F#m."

    def measure(self, facts: PieceFacts) -> str | None:
        return facts.key if facts.key in KEY_VALUES else estimate_key(facts.notes)

    def normalise(self, value: str | int) -> str:  # "e minor", "Em", "E:min" -> "E:minor"
        v = super().normalise(value)
        m = re.fullmatch(r"([a-g])([#b]?)[\s:_-]*(major|minor|maj|min|m)?", v)
        if not m:
            return v
        idx = (PITCH_NAMES.index(m.group(1).upper()) + {"#": 1, "b": -1, "": 0}[m.group(2)]) % 12
        return f"{PITCH_NAMES[idx]}:{'minor' if (m.group(3) or 'major') in ('minor', 'min', 'm') else 'major'}"


@register
class Style(Control):
    name, scope, option, label = "Style", PIECE, "style", "Style"
    help = ("Run with controls: a style it learned (the dataset's folder names); without --time-signature the "
            "style's usual meter.")

    def vocabulary(self, styles: Sequence[str]) -> tuple[str, ...]:
        return tuple(style_name(s) for s in styles)  # the dataset's styles, never a fixed list

    def measure(self, facts: PieceFacts) -> str | None:
        return style_name(facts.style) if facts.style else None

    def normalise(self, value: str | int) -> str:
        return style_name(super().normalise(value))


@register
class Density(Control):
    name, scope, values, option, label = "Density", BAR, DENSITY_VALUES, "density", "Density"
    help = ("Run with controls: onsets per beat: low, mid, high in every bar, or per bar: 1-4:low,5-8:high (so are "
            "--polyphony, --palm-mute, --techniques, --hand-position).")

    def measure(self, facts: BarFacts) -> str:
        quarters = max(facts.bar_ticks, 1) / facts.ticks_per_quarter
        return density_value(density([n.onset for n in facts.notes], quarters))


@register
class Poly(Control):
    name, scope, values, option, label = "Poly", BAR, POLY_VALUES, "polyphony", "Polyphony"
    help = "Run with controls: single (notes), dyads, chords."

    def measure(self, facts: BarFacts) -> str:
        return POLY_VALUES[polyphony_class([n.onset for n in facts.notes]) - 1]


@register
class Pos(Control):
    name, scope, values, option, label, field = "Pos", BAR, POS_VALUES, "hand_position", "Hand position (fret)", "int"
    help = ("Run with controls: ask for this hand position (a fret: 0-4, 5-9, 10-14, 15+) in every bar, or per bar: "
            "1-4:0,5-8:7; the model's own strings are kept.")

    def measure(self, facts: BarFacts) -> str | None:
        frets = [n.fret for n in facts.notes if n.fret >= 0]
        if not frets:
            return None
        fretted = [f for f in frets if f > 0]
        return position_value(median(fretted)) if fretted else POS_VALUES[0]

    def normalise(self, value: str | int) -> str:
        v = super().normalise(value)
        return position_value(int(v)) if re.fullmatch(r"\d+", v) else v

    def from_option(self, value: str | int) -> str:
        if not re.fullmatch(r"\s*\d+\s*", str(value)):
            raise GuitarformerError(f"--hand-position {value!r} is not a fret", "give a fret number, e.g. "
                                    "--hand-position 7, or per bar: --hand-position 1-4:0,5-8:7")
        return position_value(int(value))

    def offered(self, seen: Any) -> list[str]:
        return list(POS_VALUES)  # every one: the sampler holds the hand position


class _Share(Control):
    """A share of the bar's notes: none, some (under half), most (low = some, high = most as options)."""

    scope, values = BAR, SHARE_VALUES

    def normalise(self, value: str | int) -> str:
        v = super().normalise(value)
        return {"low": "some", "high": "most", "off": "none", "0": "none"}.get(v, v)

    def measure(self, facts: BarFacts) -> str:
        return share_value(sum(self.marks(n.technique) for n in facts.notes) / len(facts.notes))

    def marks(self, t: Technique) -> bool:
        raise NotImplementedError


@register
class PM(_Share):
    name, option, label = "PM", "palm_mute", "Palm mute"
    help = "Run with controls: palm-muted share of notes: none, some, most (low = some, high = most)."

    def marks(self, t: Technique) -> bool:
        return t.palm_mute


@register
class Tech(_Share):
    name, option, label = "Tech", "techniques", "Techniques"
    help = ("Run with controls: share of notes with other techniques (bends, slides, legato, ...): none, some, "
            "most.")

    def marks(self, t: Technique) -> bool:
        return _other_technique(t)


class Controls:
    """The controls a request asks for, by option name ({"key": "E:minor", "density": "1-4:low,5-8:high"}; None:
    not asked): any registered control's option (`option_controls`)."""

    def __init__(self, **asked: Any) -> None:
        known = option_controls()
        unknown = sorted(set(asked) - set(known))
        if unknown:
            raise GuitarformerError(f"unknown control option {', '.join(map(repr, unknown))}",
                                    f"use one of {', '.join(known)}")
        self._asked = {k: v for k, v in asked.items() if v is not None}

    def __getattr__(self, option: str) -> Any:
        if option.startswith("_") or option not in option_controls():
            raise AttributeError(option)
        return self._asked.get(option)

    def asked(self) -> dict[str, Any]:
        """{option: value} of every control asked, in token order."""
        order = list(option_controls())
        return dict(sorted(self._asked.items(), key=lambda kv: order.index(kv[0])))

    def __bool__(self) -> bool:
        return bool(self._asked)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Controls) and self._asked == other._asked

    def __repr__(self) -> str:
        return f"Controls({', '.join(f'{k}={v!r}' for k, v in self.asked().items())})"


# ---------------------------------------------------------------- as tokens


def control_type(name: str) -> str:
    """The token type of a control: "Density" -> "CtrlDensity"."""
    return PREFIX + name


def control_token(name: str, value: str) -> str:
    return f"{control_type(name)}_{value}"


def control_vocabulary(styles: Sequence[str]) -> list[str]:
    """Every control token, piece controls first, for a tokenizer whose style vocabulary is `styles`."""
    return [control_token(c.name, v) for c in registered() for v in c.vocabulary(styles)]


def control_index(token: str) -> int:
    """Index in `control_names()` of a control token's type, -1 for any other token."""
    kind, names = token.split("_", 1)[0], control_names()
    return names.index(kind[len(PREFIX):]) if kind.startswith(PREFIX) and kind[len(PREFIX):] in names else -1


def control_kinds(vocab: dict[str, int], size: int) -> np.ndarray:
    """(V,) int: index in CONTROLS of each id's control type, -1 for ids that are no control."""
    out = np.full(size, -1, dtype=np.int64)
    for token, i in vocab.items():
        if 0 <= i < size:
            out[i] = control_index(token)
    return out


def option_value(name: str, value: str | int) -> str:
    """A sampling option as a control value (the control's `normalise`): --position 7 -> "5-9", --palm-mute high ->
    "most", --tuning "drop d" -> "drop-d"; anything else must be one of the control's values."""
    return control(name).normalise(value)


def prompt_tokens(vocab: dict[str, int], **options: str | int | None) -> tuple[list[int], list[int]]:
    """Token ids to ask a model with controls for what the options say: (piece ids, to follow BOS; bar ids,
    to follow every Bar). Options are control names in any case (tuning, capo, key, style, density, poly,
    pos, pm, tech); None leaves a control out. An unknown value is a GuitarformerError naming the known ones."""
    names = control_names()
    by_lower = {c.lower(): c for c in names}
    chosen: dict[str, str] = {}
    for key, value in options.items():
        name = by_lower.get(key.lower().replace("_", "").replace("-", ""))
        if name is None:
            raise GuitarformerError(f"unknown control {key!r}", f"use one of {', '.join(c.lower() for c in names)}")
        if value is not None:
            chosen[name] = option_value(name, value)
    piece: list[int] = []
    bar: list[int] = []
    for name in names:
        if name not in chosen:
            continue
        token = control_token(name, chosen[name])
        if token not in vocab:
            known = sorted(t.split("_", 1)[1] for t in vocab if t.startswith(control_type(name) + "_"))
            if not known:
                raise GuitarformerError(f"this model was trained without {name.lower()} controls",
                                        "sample without that option, or train on a dataset prepared with controls")
            raise GuitarformerError(f"{name.lower()} {chosen[name]!r} is not among this model's values",
                                    f"use one of: {', '.join(known)}")
        (piece if control(name).scope == PIECE else bar).append(vocab[token])
    return piece, bar


def meter_tokens(vocab: dict[str, int], time_signature: str | None = None, tempo: float | None = None) -> list[int]:
    """Tempo and time signature are REMI's own tokens, not controls: the ids that open a bar in them, to follow
    ``Bar`` (and its bar controls): ``TimeSig_7/8``, then ``Position_0 Tempo_<nearest>`` for a tempo."""
    out: list[int] = []
    if time_signature is not None:
        token = f"TimeSig_{time_signature.strip()}"
        if token not in vocab:
            known = [t.split("_", 1)[1] for t in vocab if t.startswith("TimeSig_")]
            raise GuitarformerError(f"time signature {time_signature!r} is not among this model's",
                                    f"use one of: {', '.join(known) or '(none: trained without time signatures)'}")
        out.append(vocab[token])
    if tempo is not None:
        tempos = {float(t.split("_", 1)[1]): i for t, i in vocab.items() if t.startswith("Tempo_")}
        if not tempos:
            raise GuitarformerError("this model was trained without tempo tokens", "sample without --tempo")
        out += [vocab["Position_0"], tempos[min(tempos, key=lambda v: abs(v - float(tempo)))]]
    return out
