"""Repeats: the sampler's side of a form (compose/form.py): a bar the plan says repeats an earlier bar is that
bar's tokens again, forced one by one through the constraint's mask.

Per row, every new bar's tokens are kept as written (after its Bar: its bar controls, time signature, positions,
notes, strings and techniques); when a Bar opens bar j and the row's plan says j repeats bar i, the next tokens
may only be bar i's, in order (a tempo change is not restated), and then only a Bar or the end; a bar without
notes repeats nothing (as evaluation/form.py counts), so a bar planned to repeat one is the model's own. Going through the
mask keeps everything else consistent: the model reads the forced tokens into its cache as if it had chosen them,
and the guitar, grammar and guard state move with them. Where the state rules a forced token out (a note of the
bar before still rings on the string it needs, the bar limit cuts a note short), the row drops the copy and the
model writes on from there: a near repeat, never a dead end. So that a note held over the bar line does not rule
the repeat out, the model's own bar before a repeat ends its notes by its bar line (where some duration allows it).
With tab layout 3 a note on its lowest-fret string has no String token: copied as it is (its Duration, then what
followed it), it lands on the same string, since the riff keeps one tuning and capo; the constraint lets the token
after that Duration through only where that string is free, so the copy stops there otherwise, like any other.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from guitarformer.generation.constraint.grammar import Grammar, keep

END = -2  # after the copy: a Bar or the end
NONE = -1


class Repeats:
    """The plans of one batch (one per row, entries per new bar) and each row's copy under way; `start`, then per
    step `restrict` the mask and `update` with the tokens chosen."""

    def __init__(self, grammar: Grammar, plans: Sequence[Sequence[int | None]], device: torch.device | str = "cpu"):
        self.plans = [list(p) for p in plans]
        self.is_bar = grammar.is_bar.tolist()
        self.restated = [t != "Tempo" for t in grammar.types]
        self.is_pitch = grammar.is_pitch.tolist()
        self.is_pos = grammar.is_pos.tolist()
        ends = torch.zeros(grammar.V, dtype=torch.bool)
        ends[grammar.bar_cols.cpu()] = True
        ends[grammar.eos] = True
        self.ends = ends.to(device)
        self.dur_cols = grammar.dur_at  # a slice where the Durations are one run of ids

    def start(self, ids: torch.Tensor, opens: bool) -> None:
        """From the prompt (B, T): with `opens`, its last Bar opens the first new bar (the tokens after it are that
        bar's so far)."""
        B = ids.shape[0]
        if len(self.plans) == 1 and B > 1:
            self.plans = self.plans * B
        if len(self.plans) != B:
            raise ValueError(f"{len(self.plans)} form plans for {B} rows")
        self.bars: list[list[list[int]]] = [[] for _ in range(B)]
        self.noted: list[list[bool]] = [[] for _ in range(B)]  # per row and bar: the bar has a note (a Pitch)
        self.todo: list[list[int] | None] = [None] * B
        self.at = [0] * B
        if not opens:
            return
        for r, row in enumerate(ids.tolist()):
            last = max((k for k, t in enumerate(row) if self.is_bar[t]), default=None)
            if last is not None:
                self.bars[r].append(row[last + 1:])
                self.noted[r].append(any(self.is_pitch[t] for t in row[last + 1:]))

    def update(self, new: list[int]) -> None:
        """The tokens just chosen (one per row)."""
        for r, t in enumerate(new):
            todo = self.todo[r]
            if self.is_bar[t]:
                self._open(r)
                continue
            if self.bars[r]:
                self.bars[r][-1].append(t)
                if self.is_pitch[t]:
                    self.noted[r][-1] = True
            if todo is not None:
                if todo[self.at[r]] == t:
                    self.at[r] += 1
                else:  # ruled out, or the row ended: the model writes on
                    self.todo[r] = None

    def _open(self, r: int) -> None:
        """Row r's Bar: a new bar, and its copy if the plan repeats an earlier bar there."""
        bars, plan = self.bars[r], self.plans[r]
        bars.append([])
        self.noted[r].append(False)
        j = len(bars) - 1
        i = plan[j] if j < len(plan) else None
        self.todo[r] = None
        if i is not None and 0 <= i < j and self.noted[r][i]:
            kept = [t for t in bars[i] if self.restated[t]]
            # a Position that held only a Tempo (left out) holds nothing: the grammar wants a note after a Position
            kept = [t for k, t in enumerate(kept) if not (self.is_pos[t] and (k + 1 == len(kept)
                                                                              or self.is_pos[kept[k + 1]]))]
            self.todo[r] = kept + [END]
            self.at[r] = 0

    def _repeat_next(self, r: int) -> bool:
        """Row r writes a bar of its own and the next bar repeats a bar with notes."""
        j, plan = len(self.bars[r]), self.plans[r]
        i = plan[j] if j < len(plan) else None
        return self.todo[r] is None and i is not None and i < j and self.noted[r][i]

    def wanted(self) -> list[int]:
        """Per row, the token its copy needs next (NONE: no copy; END: a Bar or the end)."""
        return [NONE if todo is None else todo[self.at[r]] for r, todo in enumerate(self.todo)]

    def restrict(self, m: torch.Tensor, time) -> torch.Tensor:
        """The mask (B, V) with each copying row held to its next token, where the mask allows it (else the row's
        mask is left as it is, and `update` drops the copy when the model chooses otherwise); `time`: the
        constraint's TimeState (where the current bar ends)."""
        before = [self._repeat_next(r) for r in range(len(self.todo))]
        if any(before):  # notes end by the bar line before a repeat, where some duration still fits
            fits = time.durations(time.bar_start + time.bar_ticks)  # (B, nD)
            held = torch.tensor(before, device=m.device) & (m[:, self.dur_cols] & fits).any(1)
            keep(m, self.dur_cols, fits | ~held.unsqueeze(1))
        want = self.wanted()
        if all(w == NONE for w in want):
            return m
        if len(want) == 1 and m.device.type == "cpu":  # one row: the same, its next token read (a few ops, not 17)
            if want[0] >= 0:
                if not m[0, want[0]]:
                    return m
                only = torch.zeros_like(m)
                only[0, want[0]] = True
                return only
            ending = m & self.ends  # END: a Bar or the end, where the mask allows one
            return ending if ending.any() else m
        w = torch.tensor(want, dtype=torch.long, device=m.device)
        if max(want) >= 0:  # some row copies a token (each part only where some row needs it: a few ops less a step)
            col = w.clamp(min=0).unsqueeze(1)
            ok = (w >= 0) & m.gather(1, col).squeeze(1)
            m = torch.where(ok.unsqueeze(1), torch.zeros_like(m).scatter_(1, col, True), m)
        if END in want:  # some row's copy is done: a Bar or the end
            ending = m & self.ends.unsqueeze(0)
            closes = (w == END) & ending.any(1)
            m = torch.where(closes.unsqueeze(1), ending, m)
        return m
