"""What a run's training data holds, per control: the values it saw and how often, so that a run is asked only for
what it learned.

A control token in a tokenizer's vocabulary says nothing about the data: every tokenizer with controls has
``CtrlPoly_chords``, also one trained on single-note fiddle tunes. `prepare` therefore counts the control tokens of
the train split (before training drops any) and writes the counts beside tokenizer.json (`SEEN_FILE`):

  piece controls (Tuning, Capo, Key, Style): pieces;  bar controls (Density, Poly, Pos, PM, Tech): bars;
  TimeSig: bars opened in each time signature;  Tempo: the range of tempos (BPM) written;  Pitch: the lowest and
  highest pitch played;  per style, the bars of each time signature and the tempo range of its pieces (what a style
  implies where the user names no meter).

A value is learned where it makes `MIN_SHARE` of its control's units, or `RARE_SHARE` and at least `MIN_SEEN` of
them: 2 chord bars of 10 in a small dataset of the user's count; 93 dyad bars among 100,000 fiddle-tune bars do not
(the shipped model asked for dyads wrote none). Runs
from before the summary get one from their dataset's token arrays where the dataset is at hand, else from the
vocabulary (`from_vocabulary`: every value counts as known, and callers say so).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from guitarformer.vocab.controls import PREFIX, control_names

SEEN_FILE = "controls_seen.json"
MIN_SHARE = 0.01  # of a control's occurrences (pieces or bars) that make a value learned,
MIN_SEEN, RARE_SHARE = 20, 0.002  # or this many occurrences that are at least this share
COUNTED_EXTRA = ("TimeSig",)  # counted beside the registered controls (`counted`)


def counted() -> tuple[str, ...]:
    """The names counted per value: every registered control, and the time signature."""
    return (*control_names(), *COUNTED_EXTRA)


@dataclass
class Seen:
    """Counts per control name (`counted`) and value, tempo and pitch ranges, and each style's meters and tempos."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    tempo: tuple[float, float] | None = None
    pitch: tuple[int, int] | None = None
    style_meters: dict[str, dict[str, int]] = field(default_factory=dict)
    style_tempos: dict[str, tuple[float, float]] = field(default_factory=dict)
    source: str = ""  # where the counts come from, for messages
    from_vocabulary: bool = False  # no data at hand: every value of the vocabulary counts as known

    def count(self, name: str, value: str) -> int:
        return self.counts.get(name, {}).get(value, 0)

    def known(self, name: str) -> list[str]:
        """The values of control `name` the run learned (seen at least MIN_SEEN times), most frequent first."""
        values = self.counts.get(name, {})
        total = max(1, sum(values.values()))

        def learned(n: int) -> bool:
            return self.from_vocabulary or n / total >= MIN_SHARE or (n >= MIN_SEEN and n / total >= RARE_SHARE)

        return sorted((v for v, n in values.items() if n and learned(n)), key=lambda v: (-values[v], v))

    def total(self, name: str) -> int:
        return sum(self.counts.get(name, {}).values())

    def usual_meter(self, style: str) -> str | None:
        """The time signature most of `style`'s bars are in (None: the style was not seen with bars)."""
        meters = self.style_meters.get(style) or {}
        return max(meters, key=lambda m: (meters[m], m)) if meters else None

    def to_json(self) -> dict:
        return {"counts": self.counts, "tempo": self.tempo, "pitch": self.pitch, "style_meters": self.style_meters,
                "style_tempos": self.style_tempos, "min_share": MIN_SHARE,
                "min_seen": MIN_SEEN, "rare_share": RARE_SHARE}

    @classmethod
    def from_json(cls, d: dict, source: str) -> "Seen":
        pair = lambda v, t: None if v is None else (t(v[0]), t(v[1]))  # noqa: E731
        return cls({k: {str(v): int(n) for v, n in c.items()} for k, c in d.get("counts", {}).items()},
                   pair(d.get("tempo"), float), pair(d.get("pitch"), int),
                   {s: {m: int(n) for m, n in c.items()} for s, c in d.get("style_meters", {}).items()},
                   {s: pair(r, float) for s, r in d.get("style_tempos", {}).items()}, source)


def _split(token: str) -> tuple[str, str]:
    """("Key", "D:major") for CtrlKey_D:major, ("TimeSig", "6/8"), ("Tempo", "121.29"), ...; ("", "") otherwise."""
    kind, _, value = token.partition("_")
    if kind.startswith(PREFIX) and kind[len(PREFIX):] in control_names():
        return kind[len(PREFIX):], value
    return (kind, value) if kind in ("TimeSig", "Tempo", "Pitch", "Bar") else ("", "")


def summarize(vocab: dict[str, int], pieces: Iterable[Sequence[int] | np.ndarray], source: str = "") -> Seen:
    """The counts of `pieces` (each one piece's token ids, controls not yet dropped) under `vocab`."""
    size = max(vocab.values()) + 1
    named = [("", "")] * size
    for token, i in vocab.items():
        named[i] = _split(token)
    totals = np.zeros(size, dtype=np.int64)
    style_meters: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    style_tempo: dict[str, list[float]] = defaultdict(list)
    ts_ids = [i for i, (k, _) in enumerate(named) if k == "TimeSig"]
    tempo_ids = [i for i, (k, _) in enumerate(named) if k == "Tempo"]
    for ids in pieces:
        c = np.bincount(np.asarray(ids, dtype=np.int64), minlength=size)[:size]
        totals += c
        styles = [named[i][1] for i in np.nonzero(c)[0] if named[i][0] == "Style"]
        for style in styles:  # one style per piece; its bars' meters and its tempos
            for i in ts_ids:
                if c[i]:
                    style_meters[style][named[i][1]] += int(c[i])
            style_tempo[style] += [float(named[i][1]) for i in tempo_ids if c[i]]
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    names = counted()
    for i in np.nonzero(totals)[0]:
        kind, value = named[i]
        if kind in names:
            counts[kind][value] = int(totals[i])
    seen_of = lambda kind, t: [t(named[i][1]) for i in np.nonzero(totals)[0] if named[i][0] == kind]  # noqa: E731
    tempos, pitches = seen_of("Tempo", float), seen_of("Pitch", int)
    return Seen(dict(counts), (min(tempos), max(tempos)) if tempos else None,
                (min(pitches), max(pitches)) if pitches else None,
                {s: dict(m) for s, m in style_meters.items()},
                {s: (min(t), max(t)) for s, t in style_tempo.items() if t}, source)


def write_seen(folder: str | Path, seen: Seen) -> Path:
    path = Path(folder) / SEEN_FILE
    path.write_text(json.dumps(seen.to_json(), indent=1, sort_keys=True))
    return path


def read_seen(folder: str | Path, source: str | None = None) -> Seen | None:
    """The summary `prepare` wrote into `folder` (a dataset or run folder; None where there is none)."""
    path = Path(folder) / SEEN_FILE
    try:
        return Seen.from_json(json.loads(path.read_text()), source or f"the training data summary {path}")
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def from_vocabulary(vocab: dict[str, int]) -> Seen:
    """Every value the vocabulary holds, as if seen (for runs whose training data is not at hand)."""
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    names = counted()
    for token in vocab:
        kind, value = _split(token)
        if kind in names:
            counts[kind][value] = 1
    tempos = [float(t.split("_", 1)[1]) for t in vocab if t.startswith("Tempo_")]
    return Seen(dict(counts), (min(tempos), max(tempos)) if tempos else None, None, {}, {},
                "the vocabulary (the training data is not at hand, so values it never held may be offered)", True)
