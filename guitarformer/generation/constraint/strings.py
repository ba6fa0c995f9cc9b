"""Which strings the notes being sampled hold, and which new pitches could still find a string of their own.

Each sounding note holds one of `len(tuning)` string slots until its end. A new pitch fits only if the
sounding notes plus it can be put on distinct strings within the frets: pitch p fits string s iff
open[s] + capo <= p <= open[s] + max_fret, and with the open strings sorted those s form an interval
[a(p), b(p)]. Hall's condition over the n(n+1)/2 contiguous windows [i, j] of strings (no window holds
more notes than it has strings) is then exact.

Tab tokens name (layout 3: name or imply) the string of every note, so there the strings also have
identities: per string, the end tick and pitch of the last note played on it. A String token may name only a string that can play the
pending pitch and on which no note still sounds (one note per string at a time), and a pitch may start
only where such a string is free. A hammer-on or pull-off (Tech_Hammer) needs a note on the same string
just before it, ended at most one beat (a quarter) earlier. And every chord fits one hand: a fretted note may
take a string only where it and the fretted notes still sounding lie within HAND_SPAN frets of each other (open
strings aside), so no sampled chord asks for frets like 0-1-14-2-18.

Tab layout 3 (vocab/tab_tokens.py) names a note's string only where it leaves the note's lowest-fret string
(`lowest_fret_string` in this tuning and capo, `lowest` here): a Duration followed by anything but a String put
the note there. So the rules above hold for that string too, with one spelling per fingering: the String token of
the lowest-fret string is never allowed, and a note may end without a String only where that string may take it
(`string_choice` splits `strings_allowed` so). The state records such a note on its string when the token
after its Duration comes (`update`: as if its String had been fed, at the note's onset); until then, the pitches
that may follow the Duration at once (a chord) are judged as if it were recorded (`blocked(now, due)`), and so is
Tech_Hammer (`hammer_allowed`).

The tolerances come from human tabs replayed through the constraint (benchmarks/check_constraint_on_tabs.py):
a new note may take a string whose earlier note would still ring for up to one position of the finest grid
(the tokenizer rounds onsets and durations apart, triplets above all), never one struck at the same tick; and
a hammer may repeat the earlier note's pitch (a slur between equal frets, or an ornament that quantisation
merged away). So 99.5% (Guitar Pro) and 99.8% (ASCII tabs) of human notes' strings pass (the rest: a fret beyond
the hand's span, a note still ringing on the string, a fret past the neck), and 99.3% / 99.7% of human hammers (150
files of each kind); layout 3 refuses exactly the notes layout 2 does, whether their string is written or implied.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

from guitarformer.vocab.tab_tokens import lowest_fret_string
from guitarformer.generation.constraint.grammar import (
    DURATION,
    NO_PITCH,
    NOTE_OFF,
    PITCH,
    STRING,
    Grammar,
)
from guitarformer.generation.constraint.timing import NEVER
from guitarformer.music.guitar import fret_of

MEMO_SIZE = 4096  # string states remembered per guitar (`_remembered`); a riff meets a few dozen to a few hundred
# The remembered answers, per guitar (grammar, tuning, capo, frets, region: what the answers read besides the state in
# their key), shared by the sampling calls of a process (a studio's riffs meet the states earlier riffs met); the last
# few guitars only. Entries are only added: a race between two calls makes an answer twice, never a wrong one.
_MEMOS: OrderedDict[tuple, dict] = OrderedDict()
_MEMOS_LOCK = threading.Lock()  # the studio samples from a thread pool
HAND_SPAN = 5  # the most frets between a chord's lowest and highest fretted note (a stretch: index on 5, pinky on 10)


def _memos(guitar: tuple) -> dict:
    """The remembered answers for this guitar (`_MEMOS`), a new dict for a guitar not among the last few."""
    with _MEMOS_LOCK:
        got = _MEMOS.get(guitar)
        if got is None:
            got = _MEMOS[guitar] = {}
            while len(_MEMOS) > 8:
                _MEMOS.popitem(last=False)
        _MEMOS.move_to_end(guitar)
        return got


def _tables(grammar: Grammar, tuning: tuple[int, ...], capo: int, max_fret: int, region: tuple[int, int] | None,
            dev: torch.device) -> dict[str, object]:
    """StringState's read-only tables for this guitar, by attribute name (the class docstring and the uses say what
    each holds): W (129, windows) whether pitch p needs a string inside window w, its transpose Wt, unplayable (129,),
    win_size; with tab tokens fits (129, nS), frets (129, nS: -1 where it cannot play), named, frets_named, cols,
    span_top, span, span_cols (`_playable`'s hand rule); with layout 3 lowest (129,)."""
    t: dict[str, object] = {}
    opens = sorted(tuning)
    n = len(opens)
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
    t["W"], t["Wt"], t["unplayable"] = W.to(dev), W.t().contiguous().to(dev), unplayable.to(dev)
    t["win_size"] = torch.tensor([j - i + 1 for i, j in windows], dtype=torch.float, device=dev)
    if grammar.tab:  # fits[p, k]: tab string k+1 (open pitch tuning[n-1-k]) can play pitch p
        fits = torch.zeros(NO_PITCH + 1, len(grammar.string_cols), dtype=torch.bool)
        for k in range(min(n, fits.shape[1])):
            fret = torch.tensor([fret_of(p, k + 1, tuning, capo) for p in range(NO_PITCH + 1)])
            fits[:, k] = (fret >= 0) & (fret + capo <= max_fret)  # frets count from the nut here
            fits[NO_PITCH, k] = False
            if region is not None:  # an asked hand position: frets in it, or the open string
                fits[:, k] &= (fret == 0) | ((fret >= region[0]) & (fret <= region[1]))
        named = t["named"] = min(n, fits.shape[1])  # strings a String token can name
        frets = torch.full((NO_PITCH + 1, fits.shape[1]), -1, dtype=torch.long)  # (129, nS), -1: cannot play
        for k in range(named):
            frets[:NO_PITCH, k] = torch.tensor([fret_of(p, k + 1, tuning, capo) for p in range(NO_PITCH)])
        t["frets"] = frets.masked_fill(~fits, -1).to(dev)
        t["fits"] = fits.to(dev)  # (129, nS)
        # `_playable`'s frets: (129, named), -1 where the string cannot play the pitch
        frets_named = t["frets_named"] = t["frets"][:, :named].contiguous()
        t["cols"] = torch.arange(named, device=dev)
        # `_playable`'s hand rule as a table: span[(hi + 1) * (top + 2) + lo] (129, named) whether pitch p on string k
        # fits one hand with the fretted notes sounding, the highest at fret hi (-1: none sounds, 0: an open string)
        # and the lowest fretted one at lo (top + 1: none), or is an open string; False where k cannot play p. One
        # lookup a mask instead of the span's (B, P, named) arithmetic. span_cols: the Pitch columns' pitches only
        # (`startable` answers for those).
        top = t["span_top"] = max(int(frets_named.max()), 0)
        F = frets_named  # (129, named), broadcast against (hi, lo, 1, 1)
        hi = torch.arange(-1, top + 1, device=dev).view(-1, 1, 1, 1)
        lo = torch.arange(0, top + 2, device=dev).view(1, -1, 1, 1)
        lo = lo.masked_fill(lo > top, 10_000)  # none fretted: no bound from below
        span = (F >= 0) & ((F == 0) | (torch.maximum(hi, F) - torch.minimum(lo, F) <= HAND_SPAN))
        span = span.reshape(-1, NO_PITCH + 1, named)
        t["span"], t["span_cols"] = span, span[:, grammar.pitch_val_at].contiguous()
        # Per token (V,): the string index a String token names (clamped: 0 for other tokens), and whether it names
        # one this guitar has (`_take_string`)
        string_val = grammar.string_val.cpu()
        t["string_k"] = (string_val - 1).clamp(0, n - 1).to(dev)
        t["string_takes"] = ((string_val > 0) & (string_val <= named)).to(dev)
    if grammar.implied:
        t["lowest"] = torch.tensor([lowest_fret_string(tuning, capo, p) - 1 for p in range(NO_PITCH + 1)],
                                   dtype=torch.long).clamp(0, n - 1).to(dev)
    return t


class StringState:
    """Per-row string slots: `slot_end` (B, n) the tick each slot's note ends (NEVER: open until its NoteOff),
    `slot_pitch` (B, n) its pitch (NO_PITCH: never used), `pending` (B,) a pitch waiting for its Duration.

    Tab tokens (`grammar.tab`) add the strings by name, numbered as in tab (index k: String_{k+1}):
    `string_end` (B, n) the tick the last note on each string ends (0: none yet), `string_pitch` (B, n) its
    pitch (NO_PITCH: the string was never played), `pending_end` (B,) where the note waiting for its String
    ends (`pending_free`: from when its string takes another; `pending_at`: its onset), `hammer_ok` (B,) whether
    the note whose string was recorded last may carry Tech_Hammer. `quarter`: ticks per quarter note of the
    tokenizer's time line (the hammer-on window). Layout 3 (`implied`): `lowest` (129,) each pitch's lowest-fret
    string (index k: String_{k+1}), `unnamed` (B,) the rows whose last token was a Duration (their note's string
    is known with the next token), `awaiting` (host) whether any row may be one.

    `grace` (ticks, tab tokens only): a note that started before now and would ring for at most this long
    counts as ended (the next note on its string cuts it); see the module docstring for why. So each note also
    has the tick from which it leaves its slot and string free, `slot_free` and `string_free` (B, n):
    max(end - grace, onset + 1)."""

    def __init__(self, grammar: Grammar, tuning: tuple[int, ...], capo: int, max_fret: int,
                 device: torch.device | str = "cpu", quarter: int = 0, grace: int = 0,
                 region: tuple[int, int] | None = None) -> None:
        self.grammar = grammar
        self.tab, self.quarter = grammar.tab, quarter
        self.guitar = (grammar, tuple(tuning), capo, max_fret, region)  # what `_remembered`'s answers are shared by
        self.grace = grace if self.tab else 0  # without names, overlapping notes would decode as two at once
        self.note_on_holds = grammar.kind == "MIDILike"  # a NoteOn takes its string at once, until its NoteOff
        self.n_strings = len(tuning)
        dev = torch.device(device)
        # The read-only tables, per pitch (W, Wt, unplayable, win_size; with tab tokens fits, frets, named, ...; layout
        # 3 lowest): made once per grammar and guitar (`Grammar.derived`), shared by every constraint for that guitar.
        vars(self).update(grammar.derived(("strings", tuple(tuning), capo, max_fret, region, str(dev)),
                                          lambda: _tables(grammar, tuple(tuning), capo, max_fret, region, dev)))
        # Layout 3: the string a note without a String token is on (the tokenizer's own rule, whatever the frets or
        # region allow: where that string may not take the note, the note must name another one).
        self.implied = grammar.implied
        self.awaiting = False

    def reset(self, B: int, device: torch.device) -> None:
        """Every string free."""
        self.memos = _memos(self.guitar) if B == 1 and device.type == "cpu" else None  # `_remembered`
        self.pending = torch.full((B,), NO_PITCH, dtype=torch.long, device=device)
        self.slot_end = torch.zeros(B, self.n_strings, dtype=torch.long, device=device)
        self.slot_pitch = torch.full((B, self.n_strings), NO_PITCH, dtype=torch.long, device=device)
        if self.tab:
            self.slot_free = self.slot_end.clone()
            self.pending_end = torch.zeros(B, dtype=torch.long, device=device)
            self.pending_free = torch.zeros(B, dtype=torch.long, device=device)
            self.pending_at = torch.zeros(B, dtype=torch.long, device=device)
            self.unnamed = torch.zeros(B, dtype=torch.bool, device=device)
            self.awaiting = False
            # (B, 3, n): each string's last note's end, free tick and pitch, in one tensor so a note taking a string
            # is one gather and one scatter; string_end, string_free and string_pitch read views of it.
            self.on_string = torch.zeros(B, 3, self.n_strings, dtype=torch.long, device=device)
            self.on_string[:, 2] = NO_PITCH
            self.hammer_ok = torch.zeros(B, dtype=torch.bool, device=device)

    def _string_views(self) -> tuple[torch.Tensor, ...]:
        """`on_string`'s three rows as (B, n) views, made again where `on_string` is another tensor (beam search
        moves rows by replacing each per-row tensor: fingering/tab_rows.py), so views are never stale."""
        views = self.__dict__.get("_views")
        if views is None or views[0] is not self.on_string:
            views = self.__dict__["_views"] = (self.on_string, *self.on_string.unbind(1))
        return views

    @property
    def string_end(self) -> torch.Tensor:
        return self._string_views()[1]

    @property
    def string_free(self) -> torch.Tensor:
        return self._string_views()[2]

    @property
    def string_pitch(self) -> torch.Tensor:
        return self._string_views()[3]

    def update(self, new: torch.Tensor, kinds: int, now: torch.Tensor, step: torch.Tensor | None,
               every: int = 0) -> None:
        """Advance with the tokens just chosen (B,) at tick `now` (B,); `step` (B,): Duration ticks (needed when
        `kinds` has DURATION). A note takes a slot at its Duration (end = now + duration) or, for MIDILike, at its
        NoteOn (end unknown until its NoteOff). `every`: the kind bits every row's token has (`Grammar.every`), where
        no row keeps its old value."""
        g = self.grammar
        if self.tab and (kinds & STRING or self.awaiting):  # first, while `pending` is still the named note's
            self._take_string(new, every)
        p = g.pitch_val[new] if kinds & (PITCH | NOTE_OFF) else None
        if kinds & PITCH:
            self.pending = p if every & PITCH else torch.where(g.is_pitch[new], p, self.pending)
        if kinds & DURATION or (self.note_on_holds and kinds & PITCH):
            opens = None  # every row opens a note (`every`), else the rows that do
            if not every & (DURATION | (PITCH if self.note_on_holds else 0)):
                opens = g.is_dur[new]
                if self.note_on_holds:
                    opens = opens | g.is_pitch[new]

            def opened(value: torch.Tensor, old: torch.Tensor) -> torch.Tensor:  # (B,): value where a note opens
                return value if opens is None else torch.where(opens, value, old)

            slot = self._slot_free().argmin(1, keepdim=True)  # ended notes have the smallest end

            def put(slots: torch.Tensor, value: torch.Tensor) -> None:  # the opening rows' slot takes value (B,)
                old = None if opens is None else slots.gather(1, slot)[:, 0]
                slots.scatter_(1, slot, opened(value, old).unsqueeze(1))

            end = torch.full_like(now, NEVER) if self.note_on_holds else now + step
            if self.tab:  # from when the note leaves its slot (and, once named, its string) to another
                free = torch.maximum(end - self.grace, now + 1)
                put(self.slot_free, free)
                self.pending_end = opened(end, self.pending_end)
                self.pending_free = opened(free, self.pending_free)
                self.pending_at = opened(now, self.pending_at)
            put(self.slot_end, end)
            put(self.slot_pitch, self.pending)
        if kinds & NOTE_OFF:  # the open slot holding that pitch ends now
            off = (self.slot_pitch == p.unsqueeze(1)) & (self.slot_end == NEVER) & g.is_off[new].unsqueeze(1)
            self.slot_end = torch.where(off, now.unsqueeze(1), self.slot_end)
        if self.implied:  # a Duration: its note's string comes with the next token (a String, or none: the lowest)
            due = bool(kinds & DURATION)
            self.unnamed = g.is_dur[new] if due else torch.zeros_like(self.unnamed)
            self.awaiting = due

    def _take_string(self, new: torch.Tensor, every: int = 0) -> None:
        """The pending note takes the string its String token names, or (layout 3, the token after its Duration is
        not a String) its lowest-fret string: its end, its pitch, and whether it may carry Tech_Hammer. `every`: the
        kind bits every row's token has (where all are Strings, every row records its note)."""
        g = self.grammar
        k, takes = self.string_k[new], self.string_takes[new]  # (B,) the string named (0 for other tokens), a real one
        records = None if every & STRING else g.is_string[new]  # None: every row
        if self.implied:
            implied = self.unnamed & ~g.is_string[new]
            k = torch.where(implied, self.lowest[self.pending], k)
            takes = takes | implied
            records = None if records is None else records | implied
        k, before, after = self._pending_on(k, takes & (self.pending != NO_PITCH))
        end, _, pitch = before[:, :, 0].unbind(1)
        hammer = self._hammer_from(end, pitch)
        self.hammer_ok = hammer if records is None else torch.where(records, hammer, self.hammer_ok)
        self.on_string.scatter_(2, k, after)

    def _pending_on(self, k: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """String k (B,) as `on_string` holds it (its last note's end, free tick and pitch) and with the pending note
        on it in `rows` (B,) bool: (the (B, 3, 1) index to scatter them at, before, after)."""
        k = k.view(-1, 1, 1).expand(-1, 3, 1)  # (B, 3, 1)
        before = self.on_string.gather(2, k)
        pending = torch.stack([self.pending_end, self.pending_free, self.pending], 1).unsqueeze(2)
        return k, before, torch.where(rows.view(-1, 1, 1), pending, before)

    def _hammer_from(self, before_end: torch.Tensor, before_pitch: torch.Tensor) -> torch.Tensor:
        """(B,) may the pending note carry Tech_Hammer, given the earlier note on its string (its end and pitch, (B,)):
        a hammer-on / pull-off comes from an earlier note on this string that ended a beat ago at most, counted from
        the note's onset. Any pitch: tabs write a slur between equal frets too, and quantisation merges the ornament
        notes between them."""
        return (before_pitch != NO_PITCH) & (self.pending_at - before_end <= self.quarter)

    # ------------------------------------------------------------ what the strings allow next

    def _slot_free(self) -> torch.Tensor:
        """(B, n) the tick from which each slot takes a new note (without tab tokens: its note's end)."""
        return self.slot_free if self.tab else self.slot_end

    def sounding(self, now: torch.Tensor) -> torch.Tensor:
        """(B, n) bool: the slots whose note still sounds at tick `now` (B,) (beyond the grace)."""
        return self._slot_free() > now.unsqueeze(1)

    def startable(self, now: torch.Tensor, due: torch.Tensor | None = None) -> torch.Tensor:
        """(B, nP) bool, over the grammar's Pitch columns (`pitch_val_at`): the pitches that may start at `now`, all
        but those with no string left for them (Hall), outside the tuning, or already sounding (never re-strike a
        sounding pitch). `due` (B,) bool, layout 3: rows whose last token was a Duration, whose note a Pitch now would
        leave on its lowest-fret string (judged so)."""
        strings = self._implied_view(due) if self.tab else None

        def make() -> torch.Tensor:
            slot_pitch = self.slot_pitch.masked_fill(~self.sounding(now), NO_PITCH)  # (B, n)
            # Windows already holding as many notes as strings take no new note whose strings lie inside.
            count = self.W[slot_pitch].sum(1)  # (B, windows)
            blocked = (count >= self.win_size).float() @ self.Wt > 0  # (B, 129)
            blocked |= self.unplayable
            ok = ~blocked.scatter_(1, slot_pitch, True)[:, self.grammar.pitch_val_at]  # (B, nP)
            if strings is not None:  # a free string of its own, where the note fits the hand with the notes sounding
                ok &= self._playable(now, strings=strings).any(-1)
            return ok

        return self._remembered("startable", lambda: self._ringing(now, strings, slots=True)[0].tolist(), make)

    def _ringing(self, now: torch.Tensor, strings: tuple[torch.Tensor, torch.Tensor] | None,
                 slots: bool = False) -> torch.Tensor:
        """(B, k) what sounds at `now` (B,), which is all the string rules read of the state: the pitch on each slot
        (`slots`) and on each string a String token names (`strings`: (string_free, string_pitch)), -1 where nothing
        sounds. (The frets `_playable` reads follow from a string's pitch; a free string is one with -1.)"""
        ends = ([self._slot_free()] if slots else []) + ([strings[0][:, :self.named]] if strings else [])
        pitches = ([self.slot_pitch] if slots else []) + ([strings[1][:, :self.named]] if strings else [])
        ends, pitches = (torch.cat(ends, 1), torch.cat(pitches, 1)) if len(ends) > 1 else (ends[0], pitches[0])
        return torch.where(ends > now.unsqueeze(1), pitches, -1)

    def _remembered(self, name: str, state, make):
        """`make()`, or what it gave before for the same `state()` (a list, the one row's values: what make reads
        that changes, `_ringing`; the rest of what it reads is fixed for the guitar, `self.guitar`): one row on a CPU
        (`memos`), where riffs meet the same few string states again and again and each of make's dozen small ops
        costs more than its arithmetic. The answer is shared: not to be written into. Elsewhere (a batch, a GPU, where
        the key would wait for it) make() every time, and the state is not read."""
        if self.memos is None:
            return make()
        key = (name, *state())
        got = self.memos.get(key)
        if got is None:
            if len(self.memos) >= MEMO_SIZE:
                self.memos.clear()
            got = self.memos[key] = make()
        return got

    def _implied_view(self, due: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(string_free, string_pitch) (B, n) with, in the `due` rows (None: none), the pending note on its
        lowest-fret string, as `update` records it once the next token is not a String."""
        if due is None:
            return self.string_free, self.string_pitch
        k, _, after = self._pending_on(self.lowest[self.pending], due)
        held = self.on_string.scatter(2, k, after)
        return held[:, 1], held[:, 2]

    def free_strings(self, now: torch.Tensor) -> torch.Tensor:
        """(B, n) bool, tab tokens: the strings on which no note sounds at tick `now` (B,)."""
        return self.string_free <= now.unsqueeze(1)

    def strings_allowed(self, now: torch.Tensor) -> torch.Tensor:
        """(B, nS) bool, tab tokens: the strings the pending note may take at `now` (B,): one that can play its
        pitch and is free, within the hand's span. Layout 2: which String tokens may come after its Duration;
        layout 3: `string_choice` splits it into those and the lowest-fret string's."""
        ok = self.fits[self.pending]  # (B, nS)
        ok[:, : self.named] = self._playable(now, self.pending)[:, 0]
        return ok

    def string_choice(self, now: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """After the pending note's Duration at `now` (B,): (B, nS) the String tokens that may come, and (B,) whether
        the note may end without one (layout 3: on its lowest-fret string, if `strings_allowed` allows that
        string; its String token never comes, one spelling per fingering); None with layout 2 (a String always)."""

        def make() -> tuple[torch.Tensor, torch.Tensor | None]:
            ok = self.strings_allowed(now)
            if not self.implied:
                return ok, None
            k = self.lowest[self.pending].unsqueeze(1)  # (B, 1)
            lowest_ok = ok.gather(1, k)[:, 0]
            return ok.scatter_(1, k, False), lowest_ok

        ringing = lambda: self._ringing(now, (self.string_free, self.string_pitch))[0].tolist()  # noqa: E731
        return self._remembered("string", lambda: [self.pending.item(), *ringing()], make)

    def hammer_allowed(self, due: torch.Tensor | None = None) -> torch.Tensor:
        """(B,) may Tech_Hammer come next: from an earlier note on the string of the note it follows (`hammer_ok`);
        `due` (B,) bool, layout 3: rows right after a Duration, where the note is on its lowest-fret string."""
        if due is None:
            return self.hammer_ok
        k = self.lowest[self.pending].unsqueeze(1)
        here = self._hammer_from(self.string_end.gather(1, k)[:, 0], self.string_pitch.gather(1, k)[:, 0])
        return torch.where(due, here, self.hammer_ok)

    def _playable(self, now: torch.Tensor, pitch: torch.Tensor | None = None,
                  strings: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """(B, P, named) bool: pitch p on string k at `now` (P: the pitches of the grammar's Pitch columns,
        `pitch_val_at`, or the row's `pitch` (B,) alone): k can play p, nothing sounds on k, and the fret fits one
        hand with the fretted notes still sounding on the other strings (an open string always does). `strings`:
        (string_free, string_pitch) to judge by instead of the state's own (`_implied_view`).

        One call per mask is a chain of small ops, so it is kept short: a string never played holds NO_PITCH, whose
        frets are -1 (`frets`), so it needs no mask of its own; whether a fret fits the hand depends only on the
        highest and lowest fretted notes sounding, so it is one row of the `span` table (`_tables`)."""
        named, top = self.named, self.span_top
        string_free, string_pitch = strings if strings is not None else (self.string_free, self.string_pitch)
        free = string_free[:, :named] <= now.unsqueeze(1)  # (B, named)
        held = self.frets_named[string_pitch[:, :named], self.cols].masked_fill_(free, -1)  # (B, named) sounding frets
        hi = held.amax(1)  # (B,) <= 0: no fretted note sounds
        lo = held.masked_fill_(held <= 0, top + 1).amin(1)  # (B,) top + 1: none
        at = (hi + 1) * (top + 2) + lo  # (B,) the row of `span` for what sounds
        fits = self.span_cols[at] if pitch is None else self.span[at, pitch].unsqueeze(1)  # (B, P, named)
        return fits & free.unsqueeze(1)

    def free_at(self, t: torch.Tensor) -> torch.Tensor:
        """(B, K) bool: fewer notes than strings still sound at each tick t (B, K) (then some pitch fits): some slot
        is free by t, so the earliest free one is."""
        return t >= self._slot_free().amin(1, keepdim=True)

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
