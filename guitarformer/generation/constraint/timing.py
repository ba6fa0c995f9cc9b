"""Where each row of a batch stands in time while it is sampled: the tick, the bar and its length, the
REMI position, and where the last allowed bar ends. All per-row state is (B,) tensors."""

from __future__ import annotations

import torch

from guitarformer.vocab.tokenization import duration_ticks, ticks_per_beat
from guitarformer.generation.constraint.grammar import BAR, PITCH, POSITION, SHIFT, TIMESIG, Grammar

NEVER = 1 << 40  # "no end yet": a MIDILike note between NoteOn and NoteOff; also "no bar limit"


class TimeState:
    """The clock of a tokenization: tick tables from the tokenizer, then per-row time after each token.

    Ticks of Duration/TimeShift tokens depend on the ticks per beat the current time signature selects,
    so `ticks` holds one row per ticks-per-beat value (index `tpb`). REMI moves in time with Bar and
    Position tokens, the others with TimeShift. `started`: a note has been struck in that row.
    """

    def __init__(self, tokenizer, grammar: Grammar, device: torch.device | str = "cpu") -> None:
        self.grammar = g = grammar
        self.remi = g.kind == "REMI"
        (self.ticks, self.min_step, self.ts_tpb, self.ts_bar, self.ts_tpp, self.default, self.dur_ticks,
         self.shift_ticks) = g.derived(("time", str(device)), lambda: _tables(tokenizer, g, torch.device(device)))

    # ------------------------------------------------------------ state

    def reset(self, B: int, device: torch.device) -> None:
        """Every row at tick 0, before any bar, in 4/4, with nothing played."""
        def z(v: int = 0) -> torch.Tensor:
            return torch.full((B,), v, dtype=torch.long, device=device)

        tpb, bar, tpp = self.default
        self.now, self.bar_start, self.bars, self.pos = z(), z(), z(), z(-1)
        self.tpb, self.bar_ticks, self.tpp = z(tpb), z(bar), z(tpp)
        self.started = torch.zeros(B, dtype=torch.bool, device=device)
        self.bar_struck = torch.zeros(B, dtype=torch.bool, device=device)  # a note struck since the last Bar
        self.from_nothing = torch.zeros(B, dtype=torch.bool, device=device)
        self.every_bar = False  # host side: some row must strike a note in every bar (`set_limit`)
        self.all_started = False  # host side: every row has struck a note (seen where a step's rows all did)
        self.had_ts = torch.zeros(B, dtype=torch.bool, device=device)
        self.max_bars: int | None = None
        self.per_bar: dict[str, torch.Tensor] = {}  # what moves only with a Bar or TimeSig (`kept`)

    def set_limit(self, max_bars: int | None) -> None:
        """From here on at most `max_bars` more bars (None: no limit)."""
        self.max_bars = max_bars
        self.per_bar.clear()
        self.bars_at_start = self.bars.clone()
        self.from_nothing = ~self.started  # (B,) no note before the limit: every bar asked sounds
        self.every_bar = bool(self.from_nothing.any()) if max_bars is not None else False
        # Time-based tokenizers: bars are counted from the prompt's (partial) last bar.
        self.limit_base = (self.now + self.bar_ticks - 1) // self.bar_ticks * self.bar_ticks

    def step_ticks(self, new: torch.Tensor) -> torch.Tensor:
        """(B,) ticks of each row's Duration or TimeShift token at its current time signature (0 for others)."""
        return self.ticks[self.tpb, new]

    def update(self, new: torch.Tensor, kinds: int, every: int = 0) -> None:
        """Advance with the tokens just chosen (B,); `kinds`: the kind bits present (others are skipped); `every`: the
        kind bits every row's token has (`Grammar.every`; 0: unknown), where no row keeps its old value."""
        g = self.grammar
        if kinds & (BAR | TIMESIG):
            self.per_bar.clear()
        if kinds & BAR:  # REMI: the first Bar opens bar 0 at tick 0
            is_bar = g.is_bar[new]
            self.bar_start = torch.where(is_bar & (self.bars > 0), self.bar_start + self.bar_ticks, self.bar_start)
            self.bars = self.bars + is_bar.long()
            if self.every_bar:
                self.bar_struck = self.bar_struck & ~is_bar
            self.pos = torch.where(is_bar, -1, self.pos)
            self.now = torch.where(is_bar, self.bar_start, self.now)
        if kinds & TIMESIG:
            is_ts = g.is_timesig[new]
            self.had_ts |= is_ts
            self.tpb = torch.where(is_ts, self.ts_tpb[new], self.tpb)
            self.bar_ticks = torch.where(is_ts, self.ts_bar[new], self.bar_ticks)
            self.tpp = torch.where(is_ts, self.ts_tpp[new], self.tpp)
        if kinds & POSITION:  # REMI Position sets the time...
            pos = g.pos_val[new]
            if every & POSITION:
                self.pos, self.now = pos, self.bar_start + pos * self.tpp
            else:
                is_pos = g.is_pos[new]
                self.pos = torch.where(is_pos, pos, self.pos)
                self.now = torch.where(is_pos, self.bar_start + pos * self.tpp, self.now)
        if kinds & SHIFT:  # ...TimeShift moves it on
            self.now = self.now + torch.where(g.is_shift[new], self.step_ticks(new), 0)
        if kinds & PITCH and self.every_bar:
            self.bar_struck = self.bar_struck | g.is_pitch[new]
        if kinds & PITCH and not self.all_started:
            if every & PITCH:
                self.started.fill_(True)
                self.all_started = True
            else:
                self.started |= g.is_pitch[new]

    # ------------------------------------------------------------ what time allows next

    def kept(self, key: str, make) -> torch.Tensor:
        """`make()`, made once until the next Bar or TimeSig (or `set_limit`), for a value that only those move (the
        masks ask for some every token). Not to be written into."""
        got = self.per_bar.get(key)
        if got is None:
            got = self.per_bar[key] = make()
        return got

    def limit(self) -> torch.Tensor:
        """(B,) the tick where the last allowed bar ends (NEVER without a bar limit)."""
        return self.kept("limit", self._limit)

    def _limit(self) -> torch.Tensor:
        if self.max_bars is None:
            return torch.full_like(self.now, NEVER)
        if self.remi:  # bars left after the current one (Bar tokens generated so far)
            return self.bar_start + self.bar_ticks * self.bars_left()
        return self.limit_base + self.max_bars * self.bar_ticks  # TimeSig only comes before the first note

    def bars_to_open(self) -> torch.Tensor:
        """(B,) REMI with a bar limit: whether the riff has bars left to open after the current one."""
        assert self.max_bars is not None
        return self.kept("to_open", lambda: self.bars - self.bars_at_start < self.max_bars)

    def last_bar_open(self) -> torch.Tensor:
        """(B,) REMI with a bar limit: no bar is left to open after the current one (`~bars_to_open()`, kept alike)."""
        return self.kept("last_open", lambda: ~self.bars_to_open())

    def bars_left(self) -> torch.Tensor:
        """(B,) REMI: bars that may still open, counting the current one (at least 1)."""
        assert self.max_bars is not None
        return (self.max_bars - (self.bars - self.bars_at_start) + 1).clamp(min=1)

    def latest_start(self) -> torch.Tensor:
        """(B,) the last tick a note of the shortest length may start on and still end by the limit."""
        return self.kept("latest_start", lambda: self.limit() - self.shortest())

    def shortest(self) -> torch.Tensor:
        """(B,) the shortest note or time step the current time signature offers."""
        return self.min_step[self.tpb]

    def timesigs(self, last: torch.Tensor, rings_until: torch.Tensor) -> torch.Tensor:
        """(B, nTS) which TimeSig tokens may come: REMI right after a Bar (or its bar controls), the others before
        the first note; with a REMI bar limit, none whose shorter bars would end before a note that rings until
        `rings_until` (B,)."""
        if self.remi:
            ok = (self.grammar.is_bar[last] | self.grammar.is_bar_ctrl[last]).unsqueeze(1)
            if self.max_bars is not None:
                bar = self.ts_bar[self.grammar.ts_cols]  # (nTS,) the bar length each TimeSig would set
                new_limit = self.bar_start.unsqueeze(1) + bar * self.bars_left().unsqueeze(1)  # (B, nTS)
                ok = ok & (new_limit >= rings_until.unsqueeze(1))
            return ok
        return (~self.started & ~self.had_ts & (self.now == 0)).unsqueeze(1)

    def positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """REMI Positions: the tick each one lands on (B, nP), and whether it may come (forward, inside the
        bar, room for a note before the limit); made once a bar but the 'forward'."""
        pv = self.grammar.pos_cols_val.unsqueeze(0)  # (1, nP)

        def in_bar() -> tuple[torch.Tensor, torch.Tensor]:  # what only a Bar or TimeSig moves: made once a bar
            t = self.bar_start.unsqueeze(1) + pv * self.tpp.unsqueeze(1)  # (B, nP)
            ok = pv * self.tpp.unsqueeze(1) < self.bar_ticks.unsqueeze(1)
            return t, ok & (t + self.shortest().unsqueeze(1) <= self.limit().unsqueeze(1))

        t, ok = self.kept("positions", in_bar)
        return t, ok & (pv > self.pos.unsqueeze(1))

    def shifts(self, limit: torch.Tensor, needs_note: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """TimeShifts: the tick each one lands on (B, nS), and whether it may come (not past `limit`; before the
        first note, or when a note must follow (`needs_note`), only with room for a note)."""
        t = self.now.unsqueeze(1) + self.shift_ticks[self.tpb]  # (B, nS)
        room = t + self.shortest().unsqueeze(1) <= limit.unsqueeze(1)
        ok = (t <= limit.unsqueeze(1)) & (self.started.unsqueeze(1) | room)
        return t, (ok & room) if needs_note else ok

    def durations(self, limit: torch.Tensor) -> torch.Tensor:
        """(B, nD) which Durations end by `limit`."""
        return self.kept("durations", lambda: self.dur_ticks[self.tpb]) <= (limit - self.now).unsqueeze(1)

    def may_open_bar(self) -> torch.Tensor:
        """(B,) REMI with a bar limit: a Bar may come once a note was played or while bars are left (a Bar past the
        limit becomes EOS, and a riff must not end empty). A riff from nothing (`from_nothing`: no note in its prompt)
        also strikes a note in every bar before the next Bar may come: a model trained on songs whose guitar rests
        for many bars would otherwise spend a short riff waiting."""
        assert self.max_bars is not None
        ok = self.started | self.bars_to_open()
        return ok & (self.bar_struck | ~self.from_nothing | (self.bars == 0))


def _tables(tokenizer, g: Grammar, dev: torch.device) -> tuple:
    """TimeState's read-only tables (its __init__ names them), from the tokenizer's time line."""
    V, types, values = g.V, g.types, g.values
    tpb_per_den = ticks_per_beat(tokenizer)
    tpbs = sorted(set(tpb_per_den.values()))
    index = {tpb: k for k, tpb in enumerate(tpbs)}
    ticks = torch.zeros(len(tpbs), V, dtype=torch.long)
    for k, tpb in enumerate(tpbs):
        table = duration_ticks(tokenizer, tpb)
        for i, (t, v) in enumerate(zip(types, values)):
            if t in ("Duration", "TimeShift") and v in table:
                ticks[k, i] = table[v]
    # Time signatures: ticks per beat (as index), ticks per position (REMI), bar length in ticks.
    npb = int(getattr(tokenizer.config, "max_num_pos_per_beat", 8) or 8)
    ts_tpb, ts_bar = torch.zeros(V, dtype=torch.long), torch.zeros(V, dtype=torch.long)
    ts_tpp = torch.ones(V, dtype=torch.long)
    for i, (t, v) in enumerate(zip(types, values)):
        if t == "TimeSig":
            num, den = (int(x) for x in v.split("/"))
            tpb = tpb_per_den[den]
            ts_tpb[i], ts_bar[i], ts_tpp[i] = index[tpb], num * tpb, max(tpb // npb, 1)
    tpb4 = tpb_per_den.get(4, tokenizer.time_division)
    default = (index.get(tpb4, 0), 4 * tpb4, max(tpb4 // npb, 1))  # 4/4 until a TimeSig says otherwise
    min_step = ticks.masked_fill(ticks <= 0, NEVER).min(1).values.to(dev)  # (n_tpb,) shortest non-zero step
    ticks = ticks.to(dev)  # (n_tpb, V)
    return (ticks, min_step, ts_tpb.to(dev), ts_bar.to(dev), ts_tpp.to(dev), default,
            ticks[:, g.dur_cols], ticks[:, g.shift_cols])  # the last two: (n_tpb, nD), (n_tpb, nS)
