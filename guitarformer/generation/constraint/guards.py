"""Guards: steering in the sampler for the controls a model alone does not hold (on by default; `--no-guard`).

A short-trained model reads its control tokens loosely: asked for E minor it drifts to D major, asked for high
density it writes a bar of quarter notes. The guards hold the riff to what was asked from the sampler's side,
through the constraint (generation/constraint/guitar.py: `GuitarConstraint(asked=Asked(guards=...))`):

- key: a bias, not a mask (the model still chooses), shaped after what data/controls.estimate_key reads: the
  correlation of the duration-weighted pitch classes with the key's Krumhansl-Kessler profile. A Pitch outside
  the asked key's scale loses `key_strength` logits; the scale's other degrees lean as the profile does
  (`profile_weight` logits per standard deviation: the third and fifth up, the sevenths down); the
  tonic, which tells E minor from G major (the same scale), gains `tonic_bonus` on the first note of each bar,
  where a key is heard, and not when the note before was the tonic, so the riff does not drone. (The tonic's
  bonus on every note held the key by droning it: 26-28% of notes repeated the previous pitch against 9-12%
  unguarded, pitch-class entropy 1.9 bits against 2.5; the sweep is beside the constants.) Tokenizations
  without REMI Positions (TSD, MIDILike, Structured) show no bar starts: there every note that does not follow
  the tonic gains `UNTIMED_TONIC_BONUS`.
- density, per bar: the number of onsets (REMI Positions) in a bar stays inside the asked class's range
  (data/controls.DENSITY_THRESHOLDS, onsets per quarter note times the bar's quarters): at the most, no further
  Position; below the least, no Bar and no end, no Position that leaves too few sixteenths for the rest, and one
  note per onset (a chord would hold every string).
  Where the strings still ringing leave no way to meet a rule, the row goes on without it (never a dead end).
- hand position, per bar (a schedule; one position for every bar is the string state's own region): a String only
  where the pending pitch's fret lies in that bar's region (or is open), a Pitch only where some string plays it so;
  with tab layout 3, a note ends without a String (on its lowest-fret string) only where that string's fret does.
- palm mute, per bar: a bar asked for most has every note palm-muted (the mark comes where a note's technique may),
  one asked for none has none (a model copying the palm-muted bars before it would go on muting), one asked for
  some gains `PALM_MUTE_BIAS` logits on the mark: the model, which saw few (a muted-guitar part is rare in its
  data), would leave them out.
- polyphony, per bar: the notes an onset holds, as the control counts them (its most common onset size: single 1,
  dyads 2, chords 3 or more): an onset with fewer than the asked size takes another note before it moves on, where
  the strings leave one playable (the model chooses which pitch; `POLY_BIAS` leans it there); one with the asked
  size of single notes or dyads takes no further note.
- style: a style implies the meter its training pieces mostly have where the user names none (`implied_meter`).

Every per-bar list is indexed by the new bar (0 = the first new bar); bars past its end take its last entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from guitarformer.vocab.controls import DENSITY_THRESHOLDS, DENSITY_VALUES, MAJOR_PROFILE, MINOR_PROFILE
from guitarformer.vocab.seen import Seen
from guitarformer.generation.constraint.grammar import BAR, PITCH, POSITION, TIMESIG, Grammar, allow, keep
from guitarformer.generation.constraint.timing import TimeState
from guitarformer.music.guitar import PITCH_NAMES, fret_of

# The key guard: logits off a pitch outside the scale; onto the tonic on a bar's first note (not after the tonic);
# per standard deviation of the key's profile on the scale's other degrees (every note); onto the tonic on every note
# not after the tonic where the tokens show no bar starts. Sweep on the shipped model, 16 riffs x 4 bars for each of
# the ten keys it learned: key share (estimate_key == asked), pitch-class entropy (bits), notes repeating the previous
# pitch, pitch classes per riff; seed 0 of the command, seeds 1 and 2 in brackets. The kept row and the unguarded one
# come from the command; the others from switches of this module that were tried and not kept. Tonic: the share of
# notes on the tonic, counted apart (the tunes' in the first four segments of each).
#   GUITARFORMER_CACHE=... python benchmarks/bench_controls.py --controls key --guard both --seed 0 \
#       --key-strength 8 --tonic-bonus 5 --profile-weight 0.75
#   unguarded:                                  42% [45 44], 2.50 [2.46 2.50], 9.3% [11.2 11.6], 6.7 (tonic 21%)
#   val tunes, 4-bar segments:                  71% (estimate_key == the tune's key), 2.51, 9.8%, 6.6 (tonic 24%)
#   before: tonic +1.25 on every note:          82% [81 82], 1.88 [1.92 1.95], 27.7% [27.1 28.2], 5.6 (tonic 52%)
#   tonic +1.25 on every note not after it:     81% [76],    2.20 [2.18],      10.3% [13.0],      6.0
#   tonic +5 on a bar's first note:             79%,         2.23,             13.0%,             6.0
#     ... and not after the tonic:              78%,         2.29,             9.5%,              6.1
#     ... and +0.75 on every other note:        88% [88 83], 2.17 [2.11 2.17], 10.1% [14.0 15.2], 6.0
#     ... and profile 0.5 instead:              89% [81 81], 2.26 [2.28 2.31], 9.4% [12.8 14.7],  6.0
#     ... and profile 0.75 instead (kept):      85% [86 84], 2.23 [2.25 2.27], 11.2% [13.1 14.9], 5.9 (tonic 30%)
#     ... the same with tonic +6:               84% [86 85], 2.21 [2.25 2.27], 11.6% [12.9 15.2], 5.9
#     ... the same with tonic +3:               77% [71 73]; with profile 1.0: 78% [79 80], 2.10, 13.7%, 5.5
#   profile 0.75 alone, no tonic bonus:         45%, 2.25 (the tonic is what tells a key from its neighbours)
#   profile 0.75, tonic +1.25 on every note not after it (UNTIMED_TONIC_BONUS's rule): 88%, 2.16, 11.4%, 5.7
# Strength 3 or 4 instead of 8 gives nearly the same riffs (top_p 0.95 already cuts what 3 logits lower). The triad
# (third and fifth +1 at a bar's first note), longer durations after the tonic, and the tonic on every note of the
# last bar did no better. The every-note bonus before (strength/bonus: share, pitch classes, repeated): 2/0.5: 61%,
# 6.1, 15%; 4/1: 78%, 5.8, 21%; 8/1: 78%, 5.8, 21%; 8/1.25: 81%, 5.7, 26%; 6/1.5: 82%, 5.4, 32%.
KEY_STRENGTH = 8.0
TONIC_BONUS = 5.0
PROFILE_WEIGHT = 0.75
UNTIMED_TONIC_BONUS = 1.25
# Semitones above the tonic in each mode's scale; minor with the raised seventh, as minor tunes lead to the tonic.
SCALES = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 10, 11)}
NO_LIMIT = 1 << 20


@dataclass
class GuardSpec:
    """What the guards hold: the key ("E:minor"), each bar's density class and hand-position region."""

    key: str | None = None
    key_strength: float = KEY_STRENGTH
    tonic_bonus: float = TONIC_BONUS
    profile_weight: float = PROFILE_WEIGHT
    density: list[str | None] = field(default_factory=list)
    regions: list[tuple[int, int] | None] = field(default_factory=list)
    palm_mute: list[str | None] = field(default_factory=list)
    polyphony: list[str | None] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.key) or any(self.density) or any(self.regions) or any(self.palm_mute) or any(self.polyphony)


# Logits onto the palm-mute technique token in a bar asked for each share of palm-muted notes
PALM_MUTE_BIAS = {"some": 1.5}  # "most" and "none" are rules: every note of the bar palm-muted, or none (`restrict`)
NEVER = -1e4
POLY_SIZE = {"single": 1, "dyads": 2, "chords": 3}  # notes an onset holds in each polyphony class
POLY_BIAS = 4.0  # logits onto another note at an onset short of the asked size


def meter_quarters(meter: str) -> float:
    """Quarter notes in a bar of `meter` ("6/8" -> 3.0, "9/8" -> 4.5)."""
    num, _, den = meter.partition("/")
    return int(num) * 4 / int(den)


def implied_meter(seen: Seen | None, style: str | None) -> str | None:
    """The time signature most of `style`'s training bars are in (None: no style, or none seen)."""
    return seen.usual_meter(style) if seen is not None and style else None


def key_bias(key: str, strength: float = KEY_STRENGTH, profile_weight: float = PROFILE_WEIGHT) -> torch.Tensor:
    """(12,) logit offsets by pitch class (C = 0) for `key` ("E:minor") on every note: -`strength` for pitch classes
    outside its scale (`SCALES`), `profile_weight` per standard deviation of the key's Krumhansl-Kessler profile for
    the scale's other degrees, 0 for the tonic (whose bonus the guards give where a bar starts)."""
    tonic, mode = key.split(":")
    t = PITCH_NAMES.index(tonic)
    profile = torch.tensor(MAJOR_PROFILE if mode == "major" else MINOR_PROFILE, dtype=torch.float32)
    lean = torch.roll((profile - profile.mean()) / profile.std(), t) * profile_weight
    bias = torch.full((12,), -float(strength))
    scale = [(t + d) % 12 for d in SCALES[mode]]
    bias[scale] = lean[scale]
    bias[t] = 0.0
    return bias


def onset_range(value: str, quarters: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(least, most) onsets (B,) a bar of `quarters` (B,) quarter notes has in density class `value`."""
    lo, hi = {"low": (0.0, DENSITY_THRESHOLDS[0]), "mid": DENSITY_THRESHOLDS,
              "high": (DENSITY_THRESHOLDS[1], math.inf)}[value]
    least = torch.ceil(lo * quarters).clamp(min=1).long()  # a bar with notes has at least one onset
    most = (torch.ceil(hi * quarters) - 1).long() if math.isfinite(hi) else torch.full_like(least, NO_LIMIT)
    return least, torch.maximum(most, least)


class Guards:
    """The guards of one sampling call (see the module docstring): `reset`, `update` with every token, `restrict`
    the constraint's mask, `steer` the logits."""

    def __init__(self, grammar: Grammar, spec: GuardSpec, tuning: tuple[int, ...], capo: int,
                 device: torch.device | str = "cpu") -> None:
        g, dev = grammar, torch.device(device)
        self.g, self.spec = g, spec
        self.bias: torch.Tensor | None = None
        if spec.key:
            pcs = g.pitch_cols_val.cpu() % 12
            per_pc = key_bias(spec.key, spec.key_strength, spec.profile_weight)
            bias = torch.zeros(g.V)
            bias[g.pitch_cols.cpu()] = per_pc[pcs]
            self.bias = bias.to(dev)
            # The tonic's bonus (V,), given per row where it applies (`steer`); each token's pitch class (-1: none).
            self.tonic = PITCH_NAMES.index(spec.key.split(":")[0])
            self.bar_starts = bool(g.pos_cols.numel())  # REMI: a bar's first note is known when it comes
            tonic = torch.zeros(g.V)
            tonic[g.pitch_cols.cpu()] = (pcs == self.tonic).float() * (
                spec.tonic_bonus if self.bar_starts else UNTIMED_TONIC_BONUS)
            self.tonic_bias = tonic.to(dev)
            pc = torch.full((g.V,), -1, dtype=torch.long)
            pc[g.pitch_cols.cpu()] = pcs
            self.pc_of = pc.to(dev)
        # Quarter notes per bar of each TimeSig token (the bar length the density range scales with).
        quarters = torch.zeros(g.V)
        for i, (t, v) in enumerate(zip(g.types, g.values)):
            if t == "TimeSig":
                quarters[i] = meter_quarters(v)
        self.ts_quarters = quarters.to(dev)
        self.density = [DENSITY_VALUES.index(v) if v else -1 for v in spec.density]
        # Per bar, the asked density's index (-1: none): made once, read every step.
        self.density_cls = torch.tensor(self.density, dtype=torch.long, device=dev) \
            if any(v >= 0 for v in self.density) else None
        # Host side (the grammar's `may_*`): per last token, may a token the density rule (Pitch, Position, Bar, EOS)
        # or the region rule (String, Pitch, a note's end without a String) acts on come next at all; where none may,
        # the rule changes nothing and `restrict` skips it (on a CPU, as the constraint's own rules do).
        self.may_count = [any(k) for k in zip(g.may_pitch, g.may_pos, g.may_bar, g.may_eos)]
        self.may_place = [any(k) for k in zip(g.may_string, g.may_pitch, g.may_note_end)]
        self.pm_col, self.pm_bias = None, None
        pm = [i for i, (t, v) in enumerate(zip(g.types, g.values)) if t == "Tech" and v == "PalmMute"]
        if any(spec.palm_mute) and pm:
            self.pm_col = pm[0]
            self.pm_bias = torch.tensor([PALM_MUTE_BIAS.get(v, 0.0) if v else 0.0 for v in spec.palm_mute],
                                        device=dev)
            self.pm_none = torch.tensor([v == "none" for v in spec.palm_mute], device=dev)
            self.pm_most = torch.tensor([v == "most" for v in spec.palm_mute], device=dev)
            self.pm_only = torch.zeros(g.V, dtype=torch.bool, device=dev)
            self.pm_only[self.pm_col] = True
        self.poly = torch.tensor([POLY_SIZE.get(v, 0) if v else 0 for v in spec.polyphony], dtype=torch.long,
                                 device=dev) if any(spec.polyphony) else None
        self.poly_row = torch.zeros(g.V, device=dev).index_fill_(0, g.pitch_cols.to(dev), POLY_BIAS)  # (V,) per note
        self.regions = None
        if any(spec.regions) and g.tab:
            nS = len(g.string_cols)
            fits = torch.ones(len(spec.regions), 129, nS, dtype=torch.bool)  # (R, pitch, string)
            for r, region in enumerate(spec.regions):
                if region is None:
                    continue
                fits[r] = False  # a String the tokenizer has beyond the tuning's strings plays nothing
                for k in range(min(nS, len(tuning))):
                    f = torch.tensor([fret_of(p, k + 1, tuning, capo) for p in range(129)])
                    fits[r, :, k] = (f == 0) | ((f >= region[0]) & (f <= region[1]))
            self.regions = fits.to(dev)
            self.region_pitch = fits.any(2)[:, g.pitch_cols_val.cpu().clamp(max=128)].to(dev)  # (R, nPitch)

    def reset(self, B: int, device: torch.device, time: TimeState) -> None:
        """Every row before its first bar; `time`: the constraint's TimeState, just reset (4/4)."""
        self.onsets = torch.zeros(B, dtype=torch.long, device=device)  # Positions in the current bar
        self.notes_here = torch.zeros(B, dtype=torch.long, device=device)  # notes struck at the current Position
        self.quarters = torch.full((B,), 4.0, device=device)  # until a TimeSig says otherwise
        self.last_pc = torch.full((B,), -1, dtype=torch.long, device=device)  # the last note's pitch class
        self.after_pm = torch.zeros(B, dtype=torch.bool, device=device)  # the last token marked a palm mute
        self._meter(time)
        self._tonic()

    def _meter(self, time: TimeState) -> None:
        """What the density rule reads of each row's meter, made when a TimeSig changes it rather than every step:
        `least_k`, `most_k` (B, 3) the onsets a bar has in each density class (`onset_range`), and `sixteenths_left`
        (B, nP) how many sixteenths a bar has left after each Position."""
        if self.density_cls is None:
            return
        ranges = [onset_range(value, self.quarters) for value in DENSITY_VALUES]
        self.least_k = torch.stack([lo for lo, _ in ranges], 1)
        self.most_k = torch.stack([hi for _, hi in ranges], 1)
        sixteenth = (time.bar_ticks.float() / (self.quarters * 4)).clamp(min=1)  # (B,)
        left = time.bar_ticks.unsqueeze(1) - self.g.pos_cols_val.unsqueeze(0) * time.tpp.unsqueeze(1)  # (B, nP)
        self.sixteenths_left = torch.floor(left.float() / sixteenth.unsqueeze(1))

    def update(self, new: torch.Tensor, kinds: int, time: TimeState, every: int = 0) -> None:
        """Advance with the tokens just chosen (B,); `kinds`: the kind bits among them (grammar.py); `time`: the
        constraint's TimeState, already advanced past them; `every`: the kind bits every row's token has."""
        g = self.g
        if self.pm_col is not None:
            self.after_pm = new == self.pm_col
        if every & POSITION:  # every row at a new onset, with no note at it yet
            self.onsets, self.notes_here = self.onsets + 1, torch.zeros_like(self.notes_here)
        elif every & PITCH:
            self.notes_here = self.notes_here + 1
        else:
            if kinds & (BAR | POSITION):  # (on a GPU every kind is asked for: the same ops, no skipping)
                self.onsets = torch.where(g.is_bar[new], 0, self.onsets + g.is_pos[new].long())
            if kinds & (BAR | POSITION | PITCH):
                self.notes_here = torch.where(g.is_bar[new] | g.is_pos[new], 0,
                                              self.notes_here + g.is_pitch[new].long())
        if kinds & TIMESIG:  # the meter, and what the density rule reads of it, change only here
            self.quarters = torch.where(g.is_timesig[new], self.ts_quarters[new], self.quarters)
            self._meter(time)
        if self.bias is not None and kinds & PITCH:
            pc = self.pc_of[new]
            self.last_pc = pc if every & PITCH else torch.where(g.is_pitch[new], pc, self.last_pc)
        if kinds & (BAR | POSITION | PITCH):
            self._tonic()

    def _tonic(self) -> None:
        """`due` (B,): where the tonic's bonus goes on the next note (`tonic_due`), made when what it reads changes
        rather than every step; `due_somewhere`: on a CPU, whether any row's is due (else True: asking would wait)."""
        if self.bias is None:
            return
        self.due = self.tonic_due()
        self.due_somewhere = self.due.device.type != "cpu" or bool(self.due.any())

    def _bar_range(self, time: TimeState, bar: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(least, most, more_bars), (B,) each, for the density rule in each row's new bar `bar` (B,): the onsets its
        asked class allows (0 and NO_LIMIT where none is asked), and whether bars are left after it (None without a bar
        limit). Only a Bar or a TimeSig changes them (`TimeState.kept`)."""
        cls = self.density_cls[self._at(self.density, bar)]  # (B,) -1: not asked
        k, asked = cls.clamp(min=0).unsqueeze(1), cls >= 0
        least = torch.where(asked, self.least_k.gather(1, k)[:, 0], 0)
        most = torch.where(asked, self.most_k.gather(1, k)[:, 0], NO_LIMIT)
        return least, most, (time.bars_left() > 1) if time.max_bars is not None else None

    def _bar_region(self, bar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(r, pitches) for the hand-position rule in each row's new bar `bar` (B,): the index of its region (B,) and
        the pitches some string plays there (B, nPitch). Only a Bar changes them (`TimeState.kept`)."""
        r = self._at(self.spec.regions, bar)
        return r, self.region_pitch[r]

    @staticmethod
    def _at(table: Sequence, bar: torch.Tensor) -> torch.Tensor:
        """(B,) the entry of a per-bar list for each row's bar (the last entry past its end)."""
        return bar.clamp(0, len(table) - 1)

    def restrict(self, m: torch.Tensor, time, bar: torch.Tensor, pending: torch.Tensor | None,
                 implied: torch.Tensor | None = None, may=lambda table: True) -> torch.Tensor:
        """The mask `m` (B, V) with the guards' rules for each row's new bar `bar` (B,); `time`: the constraint's
        TimeState; `pending` (B,): the pitch awaiting its String (tab tokens); `implied` (B,), tab layout 3: the
        string index (k: String_{k+1}) the pending note is on if no String follows, in the rows right after its
        Duration (-1 elsewhere); `may(table)`: the constraint's host-side test, whether any row's next token may be
        of a kind (a table per last token, as the grammar's `may_*`); by default every rule is applied."""
        g = self.g
        if self.poly is not None and may(g.may_pitch):  # an onset of single notes or dyads holds no more
            size = torch.where(bar >= 0, self.poly[self._at(self.poly, bar)], 0)
            keep(m, g.pitch_at, ~((size > 0) & (size < 3) & (self.notes_here >= size)).unsqueeze(1))
            # an onset short of its size moves on (a Position, a Bar, the end) only where no further note can come
            hold = (self.notes_here >= 1) & (self.notes_here < size) & m[:, g.pitch_at].any(1)
            if m.device.type != "cpu" or bool(hold.any()):
                for cols in (g.pos_at, g.bar_at):
                    keep(m, cols, ~hold.unsqueeze(1))
                keep(m, g.eos, ~hold)
        if self.pm_bias is not None and bool(self.pm_none.any()):  # a bar asked for no palm mute has none
            keep(m, self.pm_col, ~(self.pm_none[self._at(self.pm_none, bar)] & (bar >= 0)))
        if self.pm_bias is not None and bool(self.pm_most.any()):  # one asked for most: each note's mark comes
            due = self.pm_most[self._at(self.pm_most, bar)] & (bar >= 0) & ~self.after_pm & m[:, self.pm_col]
            m = torch.where(due.unsqueeze(1), self.pm_only, m)
        if self.density_cls is not None and may(self.may_count):
            before = m.clone()
            least, most, more_bars = time.kept("density", lambda: self._bar_range(time, bar))
            need = least - self.onsets  # (B,) onsets still owed by this bar
            capped = self.onsets >= most
            owed = need > 0
            if may(g.may_pos):
                keep(m, g.pos_at, ~capped.unsqueeze(1))
            if may(g.may_eos):  # no end while onsets are owed, nor after a full bar while bars are left
                keep(m, g.eos, ~(owed | (capped & more_bars)) if more_bars is not None else ~owed)
            # The rules below change nothing in rows that owe no onset: on a CPU, skipped where no row does.
            if m.device.type != "cpu" or bool(owed.any()):
                keep(m, g.bar_at, ~owed.unsqueeze(1))
                # Room for the owed onsets after a Position, a sixteenth apart: (ticks left) / sixteenth >= need.
                room = self.sixteenths_left >= need.unsqueeze(1)
                keep(m, g.pos_at, room | ~owed.unsqueeze(1))
                # A bar that owes onsets moves on after one note: stacking a chord there would spend every string.
                keep(m, g.pitch_at, ~(owed & (self.notes_here > 0)).unsqueeze(1))
                # Owed onsets no Position can start (every string ringing, or no room): the bar may end after all.
                stuck = owed & before[:, g.bar_at].any(1) & ~m[:, g.pos_at].any(1)
                allow(m, g.bar_at, before[:, g.bar_at] & stuck.unsqueeze(1))
                allow(m, g.eos, before[:, g.eos] & stuck)
            # The strings or the time left cannot meet a rule: the row goes on without it.
            m = torch.where(m.any(1, keepdim=True), m, before)
        if self.regions is not None and pending is not None and may(self.may_place):
            held = m.clone()
            r, pitches = time.kept("region", lambda: self._bar_region(bar))
            if may(g.may_pitch):
                keep(m, g.pitch_at, pitches)
            if may(g.may_string) or implied is not None:
                fits = self.regions[r, pending.clamp(max=128)]  # (B, nS)
                keep(m, g.string_at, fits)
                if implied is not None:  # a note without a String is on its lowest-fret string: its fret in the region
                    there = fits.gather(1, implied.clamp(min=0).unsqueeze(1))[:, 0]
                    keep(m, g.note_end_at, (there | (implied < 0)).unsqueeze(1))
            # No string free in the region: this token may leave it (the density rule still holds).
            m = torch.where(m.any(1, keepdim=True), m, held)
        return m

    def tonic_due(self) -> torch.Tensor:
        """(B,) bool: the next note is where the tonic gains its bonus: the first note of a bar (with REMI Positions;
        every note without them), unless the note before was the tonic."""
        due = self.last_pc != self.tonic
        if self.bar_starts:
            due &= (self.onsets == 1) & (self.notes_here == 0)
        return due

    def steer(self, logits: torch.Tensor, bar: torch.Tensor | None = None) -> torch.Tensor:
        """The logits (B, V) with the key's bias added (every note's, and the tonic's where it is due) and the palm
        mute's of each row's bar (`bar` (B,): the new bar, as `restrict` takes it)."""
        if self.poly is not None and bar is not None:  # an onset short of the asked size: another note
            size = torch.where(bar >= 0, self.poly[self._at(self.poly, bar)], 0)
            short = (self.notes_here >= 1) & (self.notes_here < size)
            logits = logits + self.poly_row.to(logits.dtype) * short.to(logits.dtype).unsqueeze(1)
        if self.pm_bias is not None and bar is not None:
            add = torch.where(bar >= 0, self.pm_bias[self._at(self.pm_bias, bar)], 0.0)
            add = torch.where(self.after_pm, NEVER, add)  # a note is palm-muted once
            logits = logits.clone()
            logits[:, self.pm_col] += add.to(logits.dtype)
        if self.bias is None:
            return logits
        out = logits + self.bias.to(logits.dtype)
        if not self.due_somewhere:  # adding the bonus times 0 would change nothing
            return out
        return out + self.due.to(logits.dtype).unsqueeze(1) * self.tonic_bias.to(logits.dtype)
