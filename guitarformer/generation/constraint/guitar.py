"""GuitarConstraint: which tokens may come next, from the tokenizer's grammar (grammar.py) and the guitar's
state (timing.py: time in the bar and the bar limit; strings.py: notes still ringing on each string, the
tuning's range), so every sample decodes and plays. With tab tokens of layout 3 (a String only where a note leaves
its lowest-fret string) a note's string is also the one its tokens leave unsaid: the mask lets a note go without a
String only where that string may take it, and never names it (the class docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from guitarformer.generation.constraint.grammar import ALL_KINDS, DURATION, STRING, Grammar, allow, keep
from guitarformer.generation.constraint.guards import Guards, GuardSpec
from guitarformer.generation.constraint.repeats import Repeats
from guitarformer.generation.constraint.strings import StringState
from guitarformer.generation.constraint.timing import TimeState
from guitarformer.music.guitar import MAX_FRET, STANDARD_TUNING

# Up to this many rows a constraint for a model on a GPU is kept on the host (`constraint_device`): there its ~100
# ops a token cost ~1 µs each, on the GPU ~6 µs of launch each whatever the batch (measured on an H200 at batch 1
# and 32: docs/results/BENCH_GPU.md). Past it the GPU's parallel arithmetic may win; not measured.
HOST_ROWS = 64


def constraint_device(model_device: torch.device | str, rows: int) -> torch.device:
    """Where a constraint for `rows` rows decoding on `model_device` is best kept: the CPU for a model on a GPU up to
    HOST_ROWS rows (generate draws on the host then: `engine._deciding_device`), the model's device otherwise."""
    model_device = torch.device(model_device)
    return torch.device("cpu") if model_device.type != "cpu" and rows <= HOST_ROWS else model_device


def _may(lasts: list[int] | None):
    """`may(table)`: whether any row's next token may be of the kind `table` says (per last token, host side: the
    grammar's `may_*` lists); always True where the last tokens are not on the host (a GPU). At one row a lookup, not
    a generator per question (a dozen questions a token)."""
    if lasts is None:
        return lambda table: True
    if len(lasts) == 1:
        only = lasts[0]
        return lambda table: table[only]
    return lambda table: any(table[t] for t in lasts)


@dataclass(frozen=True)
class Asked:
    """What a piece is asked to hold beyond the grammar and the guitar (see GuitarConstraint): `bar_controls` (ids, or
    a schedule of id lists, one per new bar), `fixed` (TimeSig_/Tempo_ ids kept), `region` (a hand position, (lowest,
    highest) fret, tab tokens), `guards` (generation/constraint/guards.py), `form` (one repeat plan per row, or one for
    all), and `prompt_opens_bar` (the prompt ends in the first new bar's Bar, else the first Bar sampled opens it)."""

    bar_controls: Sequence[int] | Sequence[Sequence[int]] | None = None
    fixed: Sequence[int] | None = None
    region: tuple[int, int] | None = None
    guards: GuardSpec | None = None
    form: Sequence[Sequence[int | None]] | None = None
    prompt_opens_bar: bool = True


class GuitarConstraint:
    """Next-token masks from the tokenizer's own grammar, plus the state the grammar cannot see.

    Grammar: miditok's `tokens_types_graph` says which token type may follow which. On top, per row (all
    (B,) tensors, so a batch of 32 costs about what one row does; what a piece is asked, `bar_controls`, `fixed`,
    `region`, `guards`, `form` and `prompt_opens_bar`, comes as one `asked`, an Asked):

    - time: REMI Positions strictly increase within a bar and stay inside it (the bar length comes from
      the last TimeSig); TimeSig only right after Bar (REMI) or once, at tick 0 (TSD, MIDILike).
    - strings: each sounding note holds one of `len(tuning)` string slots until its end (Duration
      tokens, or NoteOff for MIDILike). A new pitch is allowed only if the sounding notes plus it can
      still be put on distinct strings within the frets, never a pitch that is already sounding, never
      one outside the tuning. A time step that must be followed by a note (REMI Position, Structured
      TimeShift) is allowed only where a string is free by then.
    - tab tokens (TabREMI) name each note's string: a String token only for a string that can play the
      pitch and on which nothing still sounds (one note per string at a time), a pitch only where such a
      string is free, Tech_Hammer only from an earlier note on that string (strings.py).
    - tab layout 3 writes a String only where a note leaves its lowest-fret string (vocab/tab_tokens.py), so
      after a Duration the mask never allows String_<lowest> (the lowest-fret string of the pending pitch in
      this tuning and capo: one spelling per fingering), and it allows the tokens that end the note without a
      String (Bend, Tech, and whatever may follow a whole note: Pitch, Position, Bar, EOS, ...) iff the
      lowest-fret string may play the note by the same rules as a String (can play it, free, within the hand's
      span, in the asked region). A note ended so is recorded on that string, as if its String had come. Where
      neither is allowed (only other rules can leave a pitch no string: the guards' region falls back by itself),
      the row's mask is empty and the last rule below lets it end (EOS), as any dead end does.
    - notes are whole: EOS never right after a Pitch or Velocity (nor, with tab layout 2, a Duration); this one
      is part of the grammar's table (grammar.py).
    - MIDILike: NoteOff only for a sounding pitch; EOS only once every note is off; when the token
      budget runs low, no new NoteOn that could not be closed in time.
    - bars: with `max_bars`, nothing starts or rings past the end of the last bar, and a row that
      reaches it can only end (EOS); with Bar tokens (REMI, TabREMI), no end either before the last bar is
      open and holds a note: the bars asked are the bars written.
    - bar controls (a tokenizer with controls): `bar_controls`, ids in the tokenizer's order, are forced
      after every Bar: after a Bar, or after one of them, only the next one may come; no other bar control
      is written (a list, even empty, says exactly which; None leaves them to the model). A list of such lists
      is a schedule, one per new bar (the last for every bar past its end): each bar gets its own.
      `prompt_opens_bar`: the prompt ends in the first new bar's Bar (else the first Bar sampled opens it).
    - guards (generation/constraint/guards.py): steering for what the model alone does not hold (key, density, a hand
      position per bar); `steer` adds their logit bias, `mask` applies their rules.
    - form (generation/constraint/repeats.py): `form`, one plan per row (or one for all): a new bar the plan says repeats an
      earlier one is that bar's tokens again, forced one by one where the rest of the mask allows them.

    The result: `tokenizer.tokens_errors()` is 0 on what `generate` writes (up to the first EOS), for
    REMI, TSD, MIDILike and Structured. A tokenizer trained with BPE is left unconstrained.

    Use: `start(prompt, max_bars)`, then per step `mask(last)` before sampling and `update(chosen)` after.
    """

    def __init__(self, tokenizer, tuning: tuple[int, ...] = STANDARD_TUNING, capo: int = 0,
                 max_fret: int = MAX_FRET, device: torch.device | str = "cpu", asked: Asked = Asked()):
        bar_controls, fixed, region, form = asked.bar_controls, asked.fixed, asked.region, asked.form
        self.V, self.device = len(tokenizer), torch.device(device)
        self.enabled = not getattr(tokenizer, "is_trained", False)
        self._rows: tuple[int, torch.device] | None = None  # (B, device) once `start` has run
        self.whole_riff = True  # with max_bars: every bar asked is written, the last with a note (a fill says False)
        if not self.enabled:
            return
        self.grammar = Grammar.of(tokenizer, self.device)
        # The id that must follow each id (-1: none): the first requested bar control after a Bar, each one's
        # successor after it.
        self.forced: torch.Tensor | None = None  # (bars in the schedule, V)
        # Columns no step may take, as one (V,) mask `keep` (None: none): the bar controls where a list says which
        # (the asked ones are forced instead), and `fixed`'s below.
        # A band tokenizer's part and drum tokens: a single part never writes them (the band's own constraint does:
        # generation/constraint/band.py).
        never = self.grammar.is_band.clone()
        if bar_controls is not None:
            never |= self.grammar.is_bar_ctrl.cpu()
        self.opens = int(asked.prompt_opens_bar)
        schedule = [list(map(int, c)) for c in bar_controls] if bar_controls and isinstance(
            bar_controls[0], (list, tuple)) else [list(map(int, bar_controls or []))]
        if any(schedule):
            forced = torch.full((len(schedule), self.V), -1, dtype=torch.long)
            for k, chain in enumerate(schedule):
                if chain:
                    forced[k, self.grammar.bar_cols.cpu()] = chain[0]
                for a, b in zip(chain, chain[1:]):
                    forced[k, a] = b
            self.forced = forced.to(self.device)
            self.forced_after = (forced >= 0).any(0).tolist()  # host side: may a last token force the next one
        # Asked time signature and tempo (`fixed`: TimeSig_/Tempo_ ids): every other value of their type is ruled
        # out, so each bar the model opens keeps the asked meter and no later tempo change undoes the asked one.
        if fixed:
            kinds = {self.grammar.types[int(i)] for i in fixed}
            banned = torch.tensor([t in kinds for t in self.grammar.types])
            banned[[int(i) for i in fixed]] = False
            never |= banned
        self.keep = (~never).to(self.device) if bool(never.any()) else None
        self.time = TimeState(tokenizer, self.grammar, self.device)
        position = self.time.default[2]  # ticks of one position of the finest (4/4) grid
        # `region` (tab tokens): an asked hand position, (lowest, highest) fret; notes go on frets in it or open
        # strings, and pitches no free string can play there are not started.
        self.strings = StringState(self.grammar, tuple(tuning), capo, max_fret, self.device, region=region,
                                   quarter=tokenizer.time_division, grace=position)
        # On CPU the grammar's host-side tables let `mask` skip the blocks whose columns the grammar already
        # rules out after the last token, and `update` skip tokens that change no state (Velocity, Tempo, ...).
        # Both are exact: a skipped block would only AND columns that are already False. (On a GPU, asking
        # which tokens were chosen would wait for it.)
        self._host = self.device.type == "cpu"
        self.guards = Guards(self.grammar, asked.guards, tuple(tuning), capo, self.device) if asked.guards else None
        self.repeats = Repeats(self.grammar, form, self.device) \
            if form and any(i is not None for plan in form for i in plan) else None

    def start(self, ids: torch.Tensor, max_bars: int | None = None) -> None:
        """Initialise per-row state from the prompt (B, T); `max_bars` counts bars after the prompt."""
        B, dev = ids.shape[0], ids.device
        self._rows = (B, dev)
        if not self.enabled:
            return
        self.time.reset(B, dev)
        self.strings.reset(B, dev)
        if self.guards is not None:
            self.guards.reset(B, dev, self.time)
        repeats, self.repeats = self.repeats, None  # the prompt's bars are read whole by `Repeats.start`
        columns = ids.t().tolist() if self._host else [None] * ids.shape[1]  # each step's tokens, read at once
        for t, chosen in enumerate(columns):
            self.update(ids[:, t], chosen)
        self.time.set_limit(max_bars)
        self.repeats = repeats
        if repeats is not None:
            repeats.start(ids, bool(self.opens))

    @property
    def notes_here(self) -> torch.Tensor | None:
        """(B,) how many notes sound at the current tick (None before `start`; zeros when unconstrained)."""
        if self._rows is None:
            return None
        if not self.enabled:
            return torch.zeros(self._rows[0], dtype=torch.long, device=self._rows[1])
        return self.strings.sounding(self.time.now).sum(1)

    def bar(self) -> torch.Tensor:
        """(B,) the new bar each row is in (0: the first after the prompt; -1: before it opens)."""
        time = self.time
        return time.kept("bar", lambda: time.bars - time.bars_at_start - 1 + self.opens)

    def steer(self, logits: torch.Tensor) -> torch.Tensor:
        """The next-token logits (B, V) with the guards' bias (unchanged without guards)."""
        return logits if not self.enabled or self.guards is None else self.guards.steer(logits, self.bar())

    def update(self, new: torch.Tensor, chosen: list[int] | None = None) -> None:
        """Advance the state with the tokens just chosen (B,) (`chosen`: the same as a list, where the caller has
        it)."""
        if not self.enabled:
            return
        if chosen is None and (self._host or self.repeats is not None):
            chosen = new.tolist()
        if self.repeats is not None:
            self.repeats.update(chosen)
        kinds = self.grammar.kinds(chosen) if self._host else ALL_KINDS
        if self.strings.awaiting:  # layout 3: whatever follows a Duration settles its note's string
            kinds |= STRING
        if not kinds:
            return  # no row's token moves time, opens or closes a note (Velocity, Tempo, ...)
        every = self.grammar.every(chosen) if self._host else 0  # on a GPU: no host-side view of the tokens
        self.time.update(new, kinds, every)
        if self.guards is not None:
            self.guards.update(new, kinds, self.time, every)
        step = self.time.step_ticks(new) if kinds & DURATION else None
        self.strings.update(new, kinds, self.time.now, step, every)

    def _ending(self, m: torch.Tensor, last: torch.Tensor, now: torch.Tensor, limit: torch.Tensor, may, one: bool
                ) -> None:
        """`mask`'s rules for a riff's end, on `m` in place (the arguments as there): nothing rings past the last bar,
        a row past it only finishes its note and ends, and no riff ends empty or short of its bars."""
        g, time = self.grammar, self.time
        if time.max_bars is not None:  # nothing rings past the last bar
            if may(g.may_dur):
                keep(m, g.dur_at, time.durations(limit))
            if may(g.whole_after):  # a row may be done (past the limit) only where its last note is whole
                past = now >= limit  # (B,)
                if one:  # one row, whose last token left no note begun (`may`)
                    if past.item():
                        m &= g.finishing
                else:
                    mid_note = g.mid_note[last]  # (B,) a note begun must be finished (Velocity, Duration, String) first
                    finished = (past & ~mid_note).unsqueeze(1)
                    m &= ~finished | g.finishing  # finish notes, then end
        # No empty riffs: EOS (and, in the last bar, a REMI Bar, which becomes EOS) only after a note. (Never in
        # the middle of one: the grammar's table says so.)
        bars = g.kind == "REMI" and time.max_bars is not None
        # (once every row has a note, a Bar always may, but in a riff from nothing, whose every bar sounds)
        if bars and (not time.all_started or time.every_bar) and may(g.may_bar):
            keep(m, g.bar_at, time.may_open_bar().unsqueeze(1))
        if may(g.may_eos):
            may_end = time.started
            if bars and self.whole_riff:
                # Bars asked are bars written: no end before the last one is open and has a note (a model may end a
                # riff after one note; `--bars 8` means eight).
                may_end = time.last_bar_open() & (time.pos >= 0)
                may_end = may_end if time.all_started else may_end & time.started
            keep(m, g.eos, may_end)

    def mask(self, last: torch.Tensor, remaining: int | None = None) -> torch.Tensor:
        """(B, V) bool: True where the next token is allowed. `remaining`: tokens left including this one."""
        if not self.enabled:
            return torch.ones(last.shape[0], self.V, dtype=torch.bool, device=last.device)
        g, time, strings = self.grammar, self.time, self.strings
        m = g.allowed[last]  # (B, V), a fresh tensor (advanced indexing copies)
        lasts = last.tolist() if self._host else None
        may, one = _may(lasts), lasts is not None and len(lasts) == 1  # `one`: one row, its last token on the host
        now, limit = time.now, time.limit()
        # Layout 3: the rows right after a Duration, whose note goes on its lowest-fret string unless a String follows.
        due = g.is_dur[last] if g.implied and may(g.may_string) else None
        if may(g.may_pitch):  # a string for it, and room for a note before the limit
            at_end = now > time.latest_start()  # (B,) no room for a note before the limit
            if not one:
                keep(m, g.pitch_at, strings.startable(now, due) & ~at_end.unsqueeze(1))
            elif at_end.item():
                m[:, g.pitch_at] = False
            else:
                keep(m, g.pitch_at, strings.startable(now, due))
        if g.kind == "MIDILike":
            keep(m, g.off_at, strings.open_notes()[:, g.off_val_at])
            n_open = strings.n_open()  # (B,)
            keep(m, g.eos, n_open == 0)
            if remaining is not None:  # close every note in time: NoteOn Velocity TimeShift + n+1 NoteOffs
                keep(m, g.pitch_at, (n_open + 4 <= remaining).unsqueeze(1))
                keep(m, g.time_at, (n_open + 1 <= remaining).unsqueeze(1))
        if may(g.may_timesig):
            keep(m, g.ts_at, time.timesigs(last, strings.rings_until()))
        if may(g.may_pos):  # REMI Position: forward, inside the bar, a string free on arrival
            t, ok = time.positions()
            keep(m, g.pos_at, ok & strings.free_at(t))
        if may(g.may_shift):  # TimeShift: not past the bar limit (Structured: a note follows, so a free string)
            needs_note = g.kind == "Structured"
            t, ok = time.shifts(limit, needs_note)
            keep(m, g.shift_at, (ok & strings.free_at(t)) if needs_note else ok)
        if g.tab:  # a String names a free string that can play the pending pitch; Tech_Hammer needs a note before
            if may(g.may_string):
                ok, lowest_ok = strings.string_choice(now)
                keep(m, g.string_at, ok)
                if due is not None:  # layout 3: no String ends the note on its lowest-fret string, if that one may
                    keep(m, g.note_end_at, (lowest_ok | ~due).unsqueeze(1))
            if may(g.may_hammer):
                keep(m, g.hammer, strings.hammer_allowed(due))
        self._ending(m, last, now, limit, may, one)
        if self.keep is not None:  # no bar control but the asked ones (forced below); no other meter or tempo
            m &= self.keep
        if self.guards is not None:
            implied = strings.lowest[strings.pending].masked_fill(~due, -1) if due is not None else None
            m = self.guards.restrict(m, time, self.bar(), getattr(strings, "pending", None), implied, may)
        if self.forced is not None and may(self.forced_after):
            # requested bar controls: nothing else may follow a Bar until they are written
            f = self.forced[self.bar().clamp(0, self.forced.shape[0] - 1), last]  # (B,) this bar's chain
            only = torch.zeros_like(m).scatter_(1, f.clamp(min=0).unsqueeze(1), True)
            m = torch.where((f >= 0).unsqueeze(1), only, m)
        if self.repeats is not None:  # a bar the form repeats: the earlier bar's tokens, where they are allowed
            m = self.repeats.restrict(m, time)
        if one:  # a dead end can always finish
            if not m.any():
                m[:, g.eos] = True
        else:
            allow(m, g.eos, ~m.any(1))
        return m
