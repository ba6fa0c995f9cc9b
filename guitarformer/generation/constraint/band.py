"""BandConstraint: which tokens may come next in a band stream (vocab/parts.py), part by part.

A band stream is bars of parts: ``Bar Part_a <a's bar> Part_b <b's bar> ...``. Each stringed part has the guitar
constraint of its own (guitar.py: the grammar, time in the bar, its strings in its tuning, the asked
bar controls), fed the single-part stream that part's tokens make (every Bar, the bar's TimeSig, its own tokens), so
it allows in the band stream what it allows a lone part; where it would let the part's bar end (a Bar, or EOS after
the last bar), the band allows the next part's token instead, or the Bar (EOS) after the last part. The kit's bar
follows simpler rules: Positions rise within the bar and stay inside it, each Position holds one to MAX_HITS
hits, no piece is struck twice at one Position, and a riff from nothing strikes something in every bar. The parts come in
`order`, each once a bar; a bar's meter is written in its first part only, and the riff keeps the meter it opens
in (a part's note ringing into the next bar never meets a shorter one); no Tempo is sampled (the asked tempo is the
song's). Rows are independent Python state (a batch is a few riffs), each with its own constraints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from guitarformer.vocab.parts import DRUM, KIT, PART, drum_token, part_token
from guitarformer.vocab.song_tokens import split_song
from guitarformer.vocab.tokenization import special_ids
from guitarformer.generation.constraint.guitar import Asked, GuitarConstraint


MAX_HITS = 4  # kit pieces struck at one time at most: a drummer's two hands and two feet


@dataclass
class BandPlan:
    """What a band is asked: the parts' `order` in each bar, each stringed part's (tuning, capo), the guitar's bar
    controls (ids, or a schedule of them per bar), the parts `given` in the prompt and never sampled (accompaniment),
    whether the prompt already opens the first new bar (`opens`), and whether a row is one part's bar (`segment`:
    the prompt ends with its part token, and the row ends where that bar may)."""

    order: list[str]
    tunings: dict[str, tuple[tuple[int, ...], int]]
    bar_controls: Sequence[int] | Sequence[Sequence[int]] | None = None
    given: tuple[str, ...] = ()
    opens: bool = False
    segment: bool = False  # one part's bar at a time: where it may end, the row ends (EOS)


@dataclass
class _Row:
    subs: dict[str, GuitarConstraint]
    last: dict[str, int]
    active: str | None = None
    bars: int = 0  # Bars seen after the prompt
    opened: bool = False  # a Bar seen at all
    positions_in_bar: int = 32
    pos: int = -1  # the kit's Position in this bar (-1: none yet)
    hits: set[int] = field(default_factory=set)  # the kit pieces struck at that Position
    struck: bool = False  # the kit struck something in this bar
    ended: bool = False
    meter: int | None = None  # the TimeSig the riff is in: every bar keeps it


class BandConstraint:
    """Next-token masks for band streams (module docstring); the interface `engine.generate` drives."""

    def __init__(self, tokenizer, plan: BandPlan):
        self.tok, self.plan, self.V = tokenizer, plan, len(tokenizer)
        self.device = torch.device("cpu")  # host-side state: `generate` draws the tokens here
        vocab = tokenizer.vocab
        self.bar_id, self.eos = vocab["Bar_None"], special_ids(tokenizer)["eos"]
        self.part_ids = {r: vocab[part_token(r)] for r in plan.order}
        self.roles_of = {i: r for r, i in self.part_ids.items()}
        types = [tokenizer[i].split("_")[0] for i in range(self.V)]
        self.drum_ids = torch.tensor([vocab[drum_token(k)] for k in KIT if drum_token(k) in vocab], dtype=torch.long)
        self.position_of = {i: int(tokenizer[i].split("_")[1]) for i in range(self.V) if types[i] == "Position"}
        self.position_ids = torch.tensor(list(self.position_of), dtype=torch.long)
        self.position_vals = torch.tensor(list(self.position_of.values()), dtype=torch.long)
        self.drums = {i for i in range(self.V) if types[i] == DRUM}
        self.timesig = {i for i in range(self.V) if types[i] == "TimeSig"}
        self.timesig_ids = torch.tensor(sorted(self.timesig), dtype=torch.long)
        self.band_cols = torch.tensor([t in (PART, DRUM, "Tempo", "Bar", "EOS") for t in types])
        self.meter_cols = torch.tensor([t in ("TimeSig", "Tempo") for t in types])
        self.rows: list[_Row] = []
        self.max_bars: int | None = None

    # ------------------------------------------------------------ state

    def start(self, ids: torch.Tensor, max_bars: int | None = None) -> None:
        """Each row's state from its prompt (B, T); `max_bars` new bars at most (None: no limit)."""
        self.max_bars = max_bars
        self.rows = []
        for row in ids.tolist():
            views = split_song(self.tok, row, every_role=True)
            subs, last = {}, {}
            for role in self.plan.order:
                if role == "drums":
                    continue
                tuning, capo = self.plan.tunings[role]
                asked = Asked(bar_controls=self.plan.bar_controls if role == "guitar" else [],
                              prompt_opens_bar=self.plan.opens)
                sub = GuitarConstraint(self.tok, tuning, capo=capo, asked=asked)
                view = views[role][:-1]  # without the EOS split_song closes it with
                sub.start(torch.tensor([view], dtype=torch.long), max_bars)
                subs[role], last[role] = sub, view[-1]
            state = _Row(subs, last)
            for t in row:
                self._follow(state, int(t), counting=False)
            self.rows.append(state)

    def update(self, new: torch.Tensor, chosen: list[int] | None = None) -> None:
        for state, t in zip(self.rows, chosen if chosen is not None else new.tolist()):
            self._follow(state, int(t), counting=True)

    def _follow(self, row: _Row, t: int, counting: bool) -> None:
        """Advance a row with token t (`counting`: sampled, so a Bar counts toward the limit; the prompt's tokens only
        set where the row stands, its constraints having read their own views)."""
        if t == self.eos:
            row.ended = True
        elif t == self.bar_id:
            row.active, row.opened, row.pos, row.hits, row.struck = None, True, -1, set(), False
            row.bars += int(counting)
            if counting:
                self._feed_all(row, t)
        elif t in self.roles_of:
            row.active, row.pos, row.hits = self.roles_of[t], -1, set()
        elif t in self.timesig:
            row.meter = t
            if counting:
                self._feed_all(row, t)
            any_sub = next(iter(row.subs.values()), None)
            if any_sub is not None:
                row.positions_in_bar = int(any_sub.time.bar_ticks[0] // any_sub.time.tpp[0])
        elif row.active == "drums":
            if t in self.position_of:
                row.pos, row.hits = self.position_of[t], set()
            elif t in self.drums:
                row.hits.add(t)
                row.struck = True
        elif counting and row.active in row.subs:
            sub = row.subs[row.active]
            sub.update(torch.tensor([t]), [t])
            row.last[row.active] = t

    def _feed_all(self, row: _Row, t: int) -> None:
        for role, sub in row.subs.items():
            sub.update(torch.tensor([t]), [t])
            row.last[role] = t

    # ------------------------------------------------------------ masks

    def mask(self, last: torch.Tensor, remaining: int | None = None) -> torch.Tensor:
        """(B, V) the tokens each row may take next."""
        return torch.stack([self._row_mask(state, remaining) for state in self.rows])

    def _row_mask(self, row: _Row, remaining: int | None) -> torch.Tensor:
        m = torch.zeros(self.V, dtype=torch.bool)
        order = self.plan.order
        if row.ended:  # past its end a row only pads
            m[self.eos] = True
            return m
        if not row.opened:  # before the first Bar (a riff from nothing opens it in its prompt)
            m[self.bar_id] = True
            return m
        if row.active is None:  # right after a Bar: the bar's first part
            m[self.part_ids[order[0]]] = True
            return m
        k = order.index(row.active)
        last_bar = False  # a stringed part's constraint says so where it allows only the end (EOS), no next Bar
        if row.active in self.plan.given:  # a given part's bar is the prompt's, whole: the next part follows
            may_end = True
        elif row.active == "drums":
            may_end = self._drum_mask(m, row)
        else:
            allowed = row.subs[row.active].mask(torch.tensor([row.last[row.active]]), remaining)[0]
            may_end = bool(allowed[self.bar_id] or allowed[self.eos])
            last_bar = bool(allowed[self.eos]) and not bool(allowed[self.bar_id])
            m = allowed & ~self.band_cols
            if k > 0:
                m &= ~self.meter_cols
            elif row.meter is not None:  # one meter for the riff: a part ringing on never meets a shorter bar
                m[self.timesig_ids] = False
                m[row.meter] = bool(allowed[row.meter])
        return self._end(m, row, k, last_bar) if may_end else m

    def _end(self, m: torch.Tensor, row: _Row, k: int, last_bar: bool) -> torch.Tensor:
        """Where the active part's bar may end: the next part, or after the last one the next Bar (EOS in the last
        bar: `last_bar`, or the bar limit reached)."""
        order = self.plan.order
        if self.plan.segment:
            m[self.eos] = True
        elif k + 1 < len(order):
            m[self.part_ids[order[k + 1]]] = True
        elif last_bar or (self.max_bars is not None and row.bars >= self.max_bars):
            m[self.eos] = True
        else:
            m[self.bar_id] = True
        return m

    def _drum_mask(self, m: torch.Tensor, row: _Row) -> bool:
        """The kit's next tokens into `m`; whether its bar may end here."""
        if row.pos >= 0 and not row.hits:  # a Position holds a hit
            m[self.drum_ids] = True
            return False
        vals = self.position_vals
        m[self.position_ids[(vals > row.pos) & (vals < row.positions_in_bar)]] = True  # later Positions in the bar
        if 0 <= row.pos and len(row.hits) < MAX_HITS:
            m[self.drum_ids] = True
            m[sorted(row.hits)] = False
        from_nothing = self.max_bars is not None and "drums" not in self.plan.given
        return row.struck or not from_nothing
