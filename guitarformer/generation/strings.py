"""Which strings the notes being sampled hold, and which new pitches could still find a string of their own.

Each sounding note holds one of `len(tuning)` string slots until its end. A new pitch fits only if the
sounding notes plus it can be put on distinct strings within the frets: pitch p fits string s iff
open[s] + capo <= p <= open[s] + max_fret, and with the open strings sorted those s form an interval
[a(p), b(p)]. Hall's condition over the n(n+1)/2 contiguous windows [i, j] of strings (no window holds
more notes than it has strings) is then exact.
"""

from __future__ import annotations

import torch

from guitarformer.generation.grammar import DURATION, NO_PITCH, NOTE_OFF, PITCH, Grammar
from guitarformer.generation.timing import NEVER


class StringState:
    """Per-row string slots: `slot_end` (B, n) the tick each slot's note ends (NEVER: open until its NoteOff),
    `slot_pitch` (B, n) its pitch (NO_PITCH: never used), `pending` (B,) a pitch waiting for its Duration."""

    def __init__(self, grammar: Grammar, tuning: tuple[int, ...], capo: int, max_fret: int,
                 device: torch.device | str = "cpu") -> None:
        self.grammar = grammar
        self.note_on_holds = grammar.kind == "MIDILike"  # a NoteOn takes its string at once, until its NoteOff
        opens = sorted(tuning)
        n = self.n_strings = len(opens)
        windows = [(i, j) for i in range(n) for j in range(i, n)]
        W = torch.zeros(NO_PITCH + 1, len(windows))  # (129, windows): pitch p needs a string inside window w
        unplayable = torch.ones(NO_PITCH + 1, dtype=torch.bool)
        for p in range(NO_PITCH):
            fits = [s for s in range(n) if opens[s] + capo <= p <= opens[s] + max_fret]
            if fits:
                unplayable[p] = False
                a, b = fits[0], fits[-1]
                for w, (i, j) in enumerate(windows):
                    W[p, w] = float(i <= a and b <= j)
        dev = torch.device(device)
        self.W, self.Wt, self.unplayable = W.to(dev), W.t().contiguous().to(dev), unplayable.to(dev)
        self.win_size = torch.tensor([j - i + 1 for i, j in windows], dtype=torch.float, device=dev)

    def reset(self, B: int, device: torch.device) -> None:
        """Every string free."""
        self.pending = torch.full((B,), NO_PITCH, dtype=torch.long, device=device)
        self.slot_end = torch.zeros(B, self.n_strings, dtype=torch.long, device=device)
        self.slot_pitch = torch.full((B, self.n_strings), NO_PITCH, dtype=torch.long, device=device)

    def update(self, new: torch.Tensor, kinds: int, now: torch.Tensor, step: torch.Tensor | None) -> None:
        """Advance with the tokens just chosen (B,) at tick `now` (B,); `step` (B,): Duration ticks (needed when
        `kinds` has DURATION). A note takes a slot at its Duration (end = now + duration) or, for MIDILike, at its
        NoteOn (end unknown until its NoteOff)."""
        g = self.grammar
        p = g.pitch_val[new] if kinds & (PITCH | NOTE_OFF) else None
        if kinds & PITCH:
            self.pending = torch.where(g.is_pitch[new], p, self.pending)
        if kinds & DURATION or (self.note_on_holds and kinds & PITCH):
            opens = g.is_dur[new]
            if self.note_on_holds:
                opens = opens | g.is_pitch[new]
            slot = self.slot_end.argmin(1, keepdim=True)  # ended notes have the smallest end
            end = torch.full_like(now, NEVER) if self.note_on_holds else now + step
            self.slot_end.scatter_(1, slot, torch.where(opens, end, self.slot_end.gather(1, slot).squeeze(1))
                                   .unsqueeze(1))
            self.slot_pitch.scatter_(1, slot, torch.where(opens, self.pending, self.slot_pitch.gather(1, slot)
                                                          .squeeze(1)).unsqueeze(1))
        if kinds & NOTE_OFF:  # the open slot holding that pitch ends now
            off = (self.slot_pitch == p.unsqueeze(1)) & (self.slot_end == NEVER) & g.is_off[new].unsqueeze(1)
            self.slot_end = torch.where(off, now.unsqueeze(1), self.slot_end)

    # ------------------------------------------------------------ what the strings allow next

    def sounding(self, now: torch.Tensor) -> torch.Tensor:
        """(B, n) bool: the slots whose note still sounds at tick `now` (B,)."""
        return self.slot_end > now.unsqueeze(1)

    def blocked(self, now: torch.Tensor) -> torch.Tensor:
        """(B, 129) bool: pitches that cannot start at `now`: no string left for them (Hall), outside the
        tuning, or already sounding (never re-strike a sounding pitch)."""
        slot_pitch = self.slot_pitch.masked_fill(~self.sounding(now), NO_PITCH)  # (B, n)
        # Windows already holding as many notes as strings take no new note whose strings lie inside.
        count = self.W[slot_pitch].sum(1)  # (B, windows)
        blocked = (count >= self.win_size).float() @ self.Wt > 0  # (B, 129)
        blocked |= self.unplayable
        return blocked.scatter_(1, slot_pitch, True)

    def free_at(self, t: torch.Tensor) -> torch.Tensor:
        """(B, K) bool: fewer notes than strings still sound at each tick t (B, K) (then some pitch fits)."""
        ringing = (self.slot_end.unsqueeze(1) > t.unsqueeze(2)).sum(-1)  # (B, K)
        return ringing < self.n_strings

    def open_notes(self) -> torch.Tensor:
        """(B, 129) bool: MIDILike pitches held open (NoteOn without NoteOff yet)."""
        open_pitch = self.slot_pitch.masked_fill(self.slot_end != NEVER, NO_PITCH)
        active = torch.zeros(open_pitch.shape[0], NO_PITCH + 1, dtype=torch.bool, device=open_pitch.device)
        active.scatter_(1, open_pitch, True)
        active[:, NO_PITCH] = False
        return active

    def n_open(self) -> torch.Tensor:
        """(B,) how many notes are held open."""
        return (self.slot_end == NEVER).sum(1)

    def rings_until(self) -> torch.Tensor:
        """(B,) the tick the last note ends."""
        return self.slot_end.max(1).values
