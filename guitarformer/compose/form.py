"""Form: which bars of a riff repeat an earlier bar of it, as a plan the sampler holds (generation/constraint/repeats.py).

A plan has one entry per new bar (0: the first bar the sampler writes): None, the model writes the bar; i, the bar
repeats new bar i note for note. Plans come from three places (`--form`):

- a real tune's form (`auto`): which of its first `PLAN_BARS` bars repeat which earlier bar, counted from the
  train split (`count_forms`, one string per tune: "-" a bar of its own, else the earlier bar it repeats, in base
  36) and kept beside the run as `FORMS_FILE`; a riff draws one, weighted by how many tunes have it, from the tunes
  of the asked style where one is asked (`FormCounts.draw`);
- letters (`parse_letters`): "AABB" is four phrases of bars / 4 bars each; a letter seen before repeats that
  phrase bar for bar;
- none: the model alone.

A bar repeats an earlier one as evaluation/form.py measures it: the same time signature and the same notes (onset
in the bar, duration, pitch); a bar without notes repeats nothing. Asked per-bar controls come first (`agree`): a
bar repeats only a bar asked the same controls, as the same notes would not be both dense and sparse.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from guitarformer.vocab.controls import PREFIX
from guitarformer.data.dataset import TokenSplit
from guitarformer.errors import GuitarformerError
from guitarformer.compose.conditioning import Conditions

PLAN_BARS = 16  # the opening a listener hears as the riff (evaluation/form.FORM_BARS measures the same bars)
FORMS_FILE = "forms_seen.json"
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"  # an earlier bar's index in a form string
FREE = "-"
MODES = ("auto", "none")
FORM_FIX = ("use --form auto (a real tune's form), --form none (the model alone) or letters, one per phrase: "
            "--form AABB")

Plan = list[int | None]


def plan_string(plan: Sequence[int | None]) -> str:
    """[None, None, 0, 1] -> "--01"."""
    return "".join(FREE if i is None else DIGITS[i] for i in plan)


def parse_plan(text: str) -> Plan:
    """"--01" -> [None, None, 0, 1]."""
    return [None if c == FREE else DIGITS.index(c) for c in text]


def form_of(bars: Sequence[object | None]) -> Plan:
    """Each bar's first earlier equal bar (None: a bar of its own, or one without notes, given as None)."""
    first: dict[object, int] = {}
    plan: Plan = []
    for j, key in enumerate(bars):
        plan.append(first.get(key) if key is not None else None)
        if key is not None:
            first.setdefault(key, j)
    return plan


def phrase_repeats(plan: Plan) -> Plan:
    """A tune's form with its phrase-level repeats only: bar i stays a repeat of bar j where the bar before it repeats
    bar j-1 or the bar after it repeats bar j+1 (two or more bars in a row repeat bars in a row); a single bar
    repeated alone is left free. Forcing every repeat a tune has, single bars too, made riffs repeat more than tunes
    and narrowed them (docs/results/EVAL.md: pitch range 0.93x, repeats 1.22x; phrases only 0.99x and 1.06x)."""
    def kept(i: int, j: int | None) -> bool:
        return j is not None and ((i > 0 and plan[i - 1] == j - 1) or (i + 1 < len(plan) and plan[i + 1] == j + 1))
    return [j if kept(i, j) else None for i, j in enumerate(plan)]


def check_form(text: str | None, bars: int | None) -> str:
    """The `--form` value normalised ("auto", "none" or upper-case letters), or the error that names the fix."""
    value = "auto" if text is None else str(text).strip()
    if value.lower() in MODES:
        return value.lower()
    if not re.fullmatch(r"[A-Za-z]+", value):
        raise GuitarformerError(f"--form {text!r} is not a form", FORM_FIX)
    parse_letters(value, bars)
    return value.upper()


def parse_letters(letters: str, bars: int | None) -> Plan:
    """The plan of `letters` ("AABB") over `bars` new bars (None: PLAN_BARS): each letter a phrase of bars / letters
    bars; a letter seen before repeats its first phrase bar for bar."""
    n = bars or PLAN_BARS
    letters = letters.upper()
    if len(letters) > n or n % len(letters):
        multiple = len(letters) * max(1, round(n / len(letters)))
        raise GuitarformerError(f"--form {letters}: {len(letters)} phrases do not split {n} bars evenly"
                                + ("" if bars else f" (without --bars a form spans {PLAN_BARS} bars)"),
                                f"give --bars a multiple of {len(letters)} (e.g. --bars {multiple}), or as many "
                                f"letters as there are phrases")
    size = n // len(letters)
    start: dict[str, int] = {}
    plan: Plan = []
    for k, letter in enumerate(letters):
        first = start.setdefault(letter, k)
        plan += [None] * size if first == k else [first * size + b for b in range(size)]
    return plan


def agree(plan: Plan, asked: Conditions | None) -> Plan:
    """`plan` without the repeats whose two bars are asked different bar controls (schedule, density, hand
    position): such a bar is the model's own."""
    if asked is None:
        return list(plan)
    lists = [asked.schedule or [], *((asked.guard.density, asked.guard.regions) if asked.guard else ())]

    def at(table: list, k: int):
        return table[min(k, len(table) - 1)] if table else None

    return [i if i is None or all(at(t, i) == at(t, j) for t in lists) else None for j, i in enumerate(plan)]


@dataclass
class FormCounts:
    """How many train tunes have each form (a `plan_string` of their first `bars` bars), per style ("": none)."""

    by_style: dict[str, dict[str, int]] = field(default_factory=dict)
    bars: int = PLAN_BARS
    source: str = ""

    def draw(self, rng: random.Random, style: str | None = None, bars: int | None = None) -> Plan:
        """One tune's form for a riff of `bars` bars (None: PLAN_BARS), weighted by its count: from `style`'s
        tunes where it has any, from tunes at least that long where there are some."""
        pool = self.by_style.get(style) if style else None
        if not pool:
            pool = defaultdict(int)
            for forms in self.by_style.values():
                for f, n in forms.items():
                    pool[f] += n
        want = min(bars or self.bars, self.bars)
        long = {f: n for f, n in pool.items() if len(f) >= want} or dict(pool)
        if not long:
            return []
        forms = sorted(long)
        plan = parse_plan(rng.choices(forms, weights=[long[f] for f in forms])[0])
        return phrase_repeats(plan[:want])

    def to_json(self) -> dict:
        return {"bars": self.bars, "by_style": self.by_style}

    @classmethod
    def from_json(cls, d: dict, source: str) -> "FormCounts":
        by_style = {str(s): {str(f): int(n) for f, n in forms.items() if set(f) <= set(DIGITS + FREE)}
                    for s, forms in d.get("by_style", {}).items()}
        return cls(by_style, int(d.get("bars", PLAN_BARS)), source)


def _roles(vocab: dict[str, int]) -> tuple[list[str], list[str]]:
    """Per id: its type and value ("Pitch", "55"), for the tokens that place notes, Bar and the piece's style."""
    size = max(vocab.values()) + 1
    types, values = [""] * size, [""] * size
    for token, i in vocab.items():
        kind, _, value = token.partition("_")
        if kind in ("Bar", "TimeSig", "Position", "Pitch", "Duration") or kind == PREFIX + "Style":
            types[i], values[i] = kind, value
    return types, values


def _bars(ids: Iterable[int], types: list[str], values: list[str], max_bars: int) -> tuple[list, str]:
    """(each of the first `max_bars` bars as (time signature, sorted notes), None for a bar without notes; the
    piece's style): a note is (position, pitch, duration) as its tokens name them."""
    bars: list[list] = []
    style, ts, pos, pitch = "", "", "", ""
    for t in ids:
        kind = types[t]
        if kind == "Bar":
            if len(bars) == max_bars:
                break
            bars.append([])
        elif kind == "TimeSig":
            ts = values[t]
        elif kind == "Position":
            pos = values[t]
        elif kind == "Pitch":
            pitch = values[t]
        elif kind == "Duration" and bars:
            bars[-1].append((pos, pitch, values[t]))
        elif kind == PREFIX + "Style":
            style = values[t]
    return [(ts, tuple(sorted(b))) if b else None for b in bars], style


def count_forms(vocab: dict[str, int], pieces: Iterable[Sequence[int] | np.ndarray], source: str = "",
                bars: int = PLAN_BARS) -> FormCounts:
    """The forms of `pieces` (token ids of whole pieces, Bar tokens marking the bars), per style."""
    types, values = _roles(vocab)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for ids in pieces:
        keys, style = _bars(np.asarray(ids).tolist(), types, values, bars)
        if any(k is not None for k in keys):
            counts[style][plan_string(form_of(keys))] += 1
    return FormCounts({s: dict(sorted(f.items())) for s, f in sorted(counts.items())}, bars, source)


def write_forms(folder: str | Path, forms: FormCounts) -> Path:
    path = Path(folder) / FORMS_FILE
    path.write_text(json.dumps(forms.to_json(), separators=(",", ":"), sort_keys=True))
    return path


def read_forms(folder: str | Path, source: str | None = None) -> FormCounts | None:
    """The forms written into `folder` (a run, the shipped model), None where there are none."""
    path = Path(folder) / FORMS_FILE
    try:
        return FormCounts.from_json(json.loads(path.read_text()), source or f"the tunes counted in {path}")
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def forms_of_dataset(folder: str | Path, tokenizer) -> FormCounts | None:
    """The forms of a prepared dataset's train split (None where it cannot be read, or its ids are BPE merges that
    hide the Bar tokens)."""
    if getattr(tokenizer, "is_trained", False):
        return None
    try:
        split = TokenSplit(folder, "train")
    except (GuitarformerError, OSError, ValueError, KeyError):
        return None
    return count_forms(tokenizer.vocab, (split.sequence(i) for i in range(split.num_sequences)),
                       f"the tunes of {Path(folder).name}")
