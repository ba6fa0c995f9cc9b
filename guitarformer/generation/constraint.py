"""GuitarConstraint: which tokens may come next, from the tokenizer's grammar and the guitar's state
(time in the bar, notes still ringing on each string, the tuning's range), so every sample decodes and plays."""

from __future__ import annotations

import symusic
import torch

from guitarformer.music.guitar import GUITAR_PROGRAM, MAX_FRET, STANDARD_TUNING

NEVER = 1 << 40  # "no end yet": a MIDILike note between NoteOn and NoteOff; also "no bar limit"
_NO_PITCH = 128  # a dummy pitch column for empty string slots


# Kinds of token, as bits: `GuitarConstraint.update` runs only the blocks for the kinds present in a step.
_BAR, _TS, _POS, _SHIFT, _PITCH, _DUR, _OFF = 1, 2, 4, 8, 16, 32, 64
_ALL_KINDS = 127


class GuitarConstraint:
    """Next-token masks from the tokenizer's own grammar, plus the state the grammar cannot see.

    Grammar: miditok's `tokens_types_graph` says which token type may follow which, so every
    tokenization miditok offers starts constrained for free. On top, per row (all (B,) tensors, so a
    batch of 32 costs about what one row does):

    - time: REMI Positions strictly increase within a bar and stay inside it (the bar length comes from
      the last TimeSig); TimeSig only right after Bar (REMI) or once, at tick 0 (TSD, MIDILike).
    - strings: each sounding note holds one of `len(tuning)` string slots until its end (Duration
      tokens, or NoteOff for MIDILike). A new pitch is allowed only if the sounding notes plus it can
      still be put on distinct strings within the frets (Hall's condition over contiguous string
      windows, exact because each pitch's playable strings form an interval), never a pitch that is
      already sounding, never one outside the tuning. A time step that must be followed by a note
      (REMI Position, Structured TimeShift) is allowed only where a string is free by then.
    - MIDILike: NoteOff only for a sounding pitch; EOS only once every note is off; when the token
      budget runs low, no new NoteOn that could not be closed in time.
    - bars: with `max_bars`, nothing starts or rings past the end of the last bar, and a row that
      reaches it can only end (EOS).

    The result: `tokenizer.tokens_errors()` is 0 on what `generate` writes (up to the first EOS), for
    REMI, TSD, MIDILike and Structured. A tokenizer trained with BPE is left unconstrained.
    """

    def __init__(self, tokenizer, tuning: tuple[int, ...] = STANDARD_TUNING, capo: int = 0,
                 max_fret: int = MAX_FRET, device: torch.device | str = "cpu"):
        V = len(tokenizer)
        self.V, self.n_strings, self.device = V, len(tuning), torch.device(device)
        self.enabled = not getattr(tokenizer, "is_trained", False)
        self.kind = type(tokenizer).__name__
        self.bos, self.eos = tokenizer["BOS_None"], tokenizer["EOS_None"]
        self._rows: tuple[int, torch.device] | None = None  # (B, device) once `start` has run
        if not self.enabled:
            return
        toks = [str(tokenizer[i]) for i in range(V)]
        types = [t.split("_")[0] for t in toks]
        vals = [t.split("_", 1)[1] if "_" in t else "" for t in toks]
        type_ids: dict[str, list[int]] = {}
        for i, t in enumerate(types):
            type_ids.setdefault(t, []).append(i)

        # Type graph -> (V, V) matrix: row = last token, column = next token.
        graph = getattr(tokenizer, "tokens_types_graph", {})
        M = torch.zeros(V, V, dtype=torch.bool)
        for t, nxt in graph.items():
            cols = sorted({j for nt in nxt for j in type_ids.get(nt.split("_")[0], [])})
            if cols and t in type_ids:
                M[torch.tensor(type_ids[t]).unsqueeze(1), torch.tensor(cols).unsqueeze(0)] = True
        for t in ("PAD", "BOS", "MASK", "PitchDrum", "DrumOn", "DrumOff"):  # no drums on a guitar
            M[:, type_ids.get(t, [])] = False
        # After BOS a piece starts the way the tokenizer itself starts one (REMI: Bar; TSD: TimeSig ...).
        M[self.bos] = False
        M[self.bos, type_ids.get(self._first_type(tokenizer), [])] = True
        self.allowed = M

        def mark(*names: str) -> torch.Tensor:
            return torch.tensor([t in names for t in types])

        self.is_pitch = mark("Pitch", "NoteOn")
        self.is_off, self.is_dur, self.is_vel = mark("NoteOff"), mark("Duration"), mark("Velocity")
        self.is_bar, self.is_pos, self.is_shift = mark("Bar"), mark("Position"), mark("TimeShift")
        self.is_timesig, self.is_tempo, self.is_eos = mark("TimeSig"), mark("Tempo"), mark("EOS")
        self.pitch_val = torch.tensor([int(v) if t in ("Pitch", "NoteOn", "NoteOff") else _NO_PITCH
                                       for t, v in zip(types, vals)])
        self.pos_val = torch.tensor([int(v) if t == "Position" else 0 for t, v in zip(types, vals)])

        # Ticks of Duration/TimeShift values for each "ticks per beat" a time signature can select.
        tpbs = sorted(set(tokenizer._tpb_per_ts.values()))
        self._tpb_index = {tpb: k for k, tpb in enumerate(tpbs)}
        ticks = torch.zeros(len(tpbs), V, dtype=torch.long)
        for k, tpb in enumerate(tpbs):
            table = tokenizer._tpb_tokens_to_ticks[tpb]
            for i, (t, v) in enumerate(zip(types, vals)):
                if t in ("Duration", "TimeShift") and v in table:
                    ticks[k, i] = table[v]
        self.ticks = ticks
        pos_ticks = ticks.masked_fill(ticks <= 0, NEVER)
        self.min_step = pos_ticks.min(1).values  # (n_tpb,) the shortest non-zero step
        # Time signatures: ticks per beat (as index), ticks per position (REMI), bar length in ticks.
        npb = int(getattr(tokenizer.config, "max_num_pos_per_beat", 8) or 8)
        self.ts_tpb = torch.zeros(V, dtype=torch.long)
        self.ts_bar = torch.zeros(V, dtype=torch.long)
        self.ts_tpp = torch.ones(V, dtype=torch.long)
        for i, (t, v) in enumerate(zip(types, vals)):
            if t == "TimeSig":
                num, den = (int(x) for x in v.split("/"))
                tpb = tokenizer._tpb_per_ts[den]
                self.ts_tpb[i], self.ts_bar[i], self.ts_tpp[i] = self._tpb_index[tpb], num * tpb, max(tpb // npb, 1)
        tpb4 = tokenizer._tpb_per_ts.get(4, tokenizer.time_division)
        self.default = (self._tpb_index.get(tpb4, 0), 4 * tpb4, max(tpb4 // npb, 1))

        # Strings: pitch p fits string s iff open[s] + capo <= p <= open[s] + max_fret. With the open
        # strings sorted, those s form an interval [a(p), b(p)]; Hall's condition over the n(n+1)/2
        # contiguous windows [i, j] (notes inside a window <= its size) decides whether the sounding
        # notes fit on distinct strings.
        opens = sorted(tuning)
        n = len(opens)
        windows = [(i, j) for i in range(n) for j in range(i, n)]
        W = torch.zeros(_NO_PITCH + 1, len(windows))
        self.unplayable = torch.ones(_NO_PITCH + 1, dtype=torch.bool)
        for p in range(_NO_PITCH):
            fits = [s for s in range(n) if opens[s] + capo <= p <= opens[s] + max_fret]
            if fits:
                self.unplayable[p] = False
                a, b = fits[0], fits[-1]
                for w, (i, j) in enumerate(windows):
                    W[p, w] = float(i <= a and b <= j)
        self.W, self.Wt = W, W.t().contiguous()
        self.win_size = torch.tensor([j - i + 1 for i, j in windows], dtype=torch.float)

        cols = lambda m: m.nonzero().squeeze(1)  # noqa: E731
        self.pitch_cols, self.off_cols, self.dur_cols = cols(self.is_pitch), cols(self.is_off), cols(self.is_dur)
        self.pos_cols, self.shift_cols, self.ts_cols = cols(self.is_pos), cols(self.is_shift), cols(self.is_timesig)
        self.time_cols = cols(self.is_shift | self.is_tempo | self.is_timesig)
        self.bar_cols = cols(self.is_bar)
        for name, value in list(vars(self).items()):
            if isinstance(value, torch.Tensor):
                setattr(self, name, value.to(self.device))
        self.pitch_cols_val = self.pitch_val[self.pitch_cols]
        self.off_cols_val = self.pitch_val[self.off_cols]
        self.pos_cols_val = self.pos_val[self.pos_cols]
        self.dur_ticks = self.ticks[:, self.dur_cols]  # (n_tpb, nD)
        self.shift_ticks = self.ticks[:, self.shift_cols]  # (n_tpb, nS)
        # A time step that must be followed by a note needs a free string when it lands.
        self.step_needs_note = self.kind == "Structured"
        # On CPU, host-side tables let `mask` skip the blocks whose columns the grammar already rules out after
        # the last token, and let `update` skip tokens that change no state (Velocity, Tempo, ...). Both are exact:
        # a skipped block would only AND columns that are already False. (On a GPU, asking would sync.)
        self._host = self.device.type == "cpu"
        host = self.allowed.cpu()

        def may_follow(cols: torch.Tensor) -> list[bool]:
            return host[:, cols.cpu()].any(1).tolist() if cols.numel() else [False] * V

        self._may_pitch, self._may_pos = may_follow(self.pitch_cols), may_follow(self.pos_cols)
        self._may_ts, self._may_shift, self._may_dur = may_follow(self.ts_cols), may_follow(self.shift_cols), \
            may_follow(self.dur_cols)
        bits = torch.zeros(V, dtype=torch.long)
        for flag, kind in ((_BAR, self.is_bar), (_TS, self.is_timesig), (_POS, self.is_pos), (_SHIFT, self.is_shift),
                           (_PITCH, self.is_pitch), (_DUR, self.is_dur), (_OFF, self.is_off)):
            bits |= kind.cpu().long() * flag
        self._kind_bits = bits.tolist()  # per token: which parts of the state it can change (0: none)

    @staticmethod
    def _first_type(tokenizer) -> str:
        """The type of the first token the tokenizer writes for a one-note score."""

        s = symusic.Score(tokenizer.time_division)
        s.tempos.append(symusic.Tempo(0, 120))
        s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
        tr = symusic.Track(program=GUITAR_PROGRAM)
        tr.notes.append(symusic.Note(0, tokenizer.time_division, 64, 100))
        s.tracks.append(tr)
        seq = tokenizer.encode(s)
        seq = seq[0] if isinstance(seq, list) else seq
        return str(seq.tokens[0]).split("_")[0]

    # ------------------------------------------------------------ state

    def start(self, ids: torch.Tensor, max_bars: int | None = None) -> None:
        """Initialise per-row state from the prompt (B, T); `max_bars` counts bars after the prompt."""
        B, dev = ids.shape[0], ids.device
        self._rows = (B, dev)
        if not self.enabled:
            return
        z = lambda v=0: torch.full((B,), v, dtype=torch.long, device=dev)  # noqa: E731
        tpb, bar, tpp = self.default
        self.now, self.bar_start, self.bars, self.pos = z(), z(), z(), z(-1)
        self.tpb, self.bar_ticks, self.tpp = z(tpb), z(bar), z(tpp)
        self.started = torch.zeros(B, dtype=torch.bool, device=dev)
        self.had_ts = torch.zeros(B, dtype=torch.bool, device=dev)
        self.pending = z(_NO_PITCH)
        self.slot_end = torch.zeros(B, self.n_strings, dtype=torch.long, device=dev)
        self.slot_pitch = torch.full((B, self.n_strings), _NO_PITCH, dtype=torch.long, device=dev)
        for t in range(ids.shape[1]):
            self.update(ids[:, t])
        self.max_bars = max_bars
        self.bars_at_start = self.bars.clone()
        # Time-based tokenizers: bars are counted from the prompt's (partial) last bar.
        self.limit_base = (self.now + self.bar_ticks - 1) // self.bar_ticks * self.bar_ticks

    @property
    def notes_here(self) -> torch.Tensor | None:
        """(B,) how many notes sound at the current tick (None before `start`; zeros when unconstrained)."""
        if self._rows is None:
            return None
        if not self.enabled:
            return torch.zeros(self._rows[0], dtype=torch.long, device=self._rows[1])
        return (self.slot_end > self.now.unsqueeze(1)).sum(1)

    def _limit(self) -> torch.Tensor:
        """(B,) the tick where the last allowed bar ends (NEVER without max_bars)."""
        if self.max_bars is None:
            return torch.full_like(self.now, NEVER)
        if self.kind == "REMI":  # bars left after the current one (Bar tokens generated so far)
            left = self.max_bars - (self.bars - self.bars_at_start) + 1
            return self.bar_start + self.bar_ticks * left.clamp(min=1)
        return self.limit_base + self.max_bars * self.bar_ticks  # TimeSig only comes before the first note

    def update(self, new: torch.Tensor) -> None:
        """Advance the state with the tokens just chosen (B,)."""
        if not self.enabled:
            return
        bits = _ALL_KINDS
        if self._host:  # which kinds of token the rows hold: skip the blocks that would change nothing
            bits = 0
            for t in new.tolist():
                bits |= self._kind_bits[t]
            if not bits:
                return  # no row's token moves time, opens or closes a note (Velocity, Tempo, ...)
        if bits & _BAR:  # bars (REMI: the first Bar opens bar 0 at tick 0)
            is_bar = self.is_bar[new]
            self.bar_start = torch.where(is_bar & (self.bars > 0), self.bar_start + self.bar_ticks, self.bar_start)
            self.bars = self.bars + is_bar.long()
            self.pos = torch.where(is_bar, -1, self.pos)
            self.now = torch.where(is_bar, self.bar_start, self.now)
        if bits & _TS:  # time signatures
            is_ts = self.is_timesig[new]
            self.had_ts |= is_ts
            self.tpb = torch.where(is_ts, self.ts_tpb[new], self.tpb)
            self.bar_ticks = torch.where(is_ts, self.ts_bar[new], self.bar_ticks)
            self.tpp = torch.where(is_ts, self.ts_tpp[new], self.tpp)
        if bits & _POS:  # time: REMI Position sets it...
            is_pos = self.is_pos[new]
            self.pos = torch.where(is_pos, self.pos_val[new], self.pos)
            self.now = torch.where(is_pos, self.bar_start + self.pos_val[new] * self.tpp, self.now)
        step = self.ticks[self.tpb, new] if bits & (_SHIFT | _DUR) else None  # (B,) Duration or TimeShift ticks
        if bits & _SHIFT:  # ...TimeShift moves it on
            self.now = self.now + torch.where(self.is_shift[new], step, 0)
        p = self.pitch_val[new] if bits & (_PITCH | _OFF) else None
        if bits & _PITCH:
            is_pitch = self.is_pitch[new]
            self.started |= is_pitch
            self.pending = torch.where(is_pitch, p, self.pending)
        midi_like = self.kind == "MIDILike"
        if bits & _DUR or (midi_like and bits & _PITCH):
            # Notes take a string slot: at Duration (end = now + duration) or, for MIDILike, at NoteOn
            # (end unknown until NoteOff).
            opens = self.is_dur[new] | (self.is_pitch[new] & midi_like)
            slot = self.slot_end.argmin(1, keepdim=True)  # ended notes have the smallest end
            end = torch.full_like(self.now, NEVER) if midi_like else self.now + step
            self.slot_end.scatter_(1, slot, torch.where(opens, end, self.slot_end.gather(1, slot).squeeze(1))
                                   .unsqueeze(1))
            self.slot_pitch.scatter_(1, slot, torch.where(opens, self.pending, self.slot_pitch.gather(1, slot)
                                                          .squeeze(1)).unsqueeze(1))
        if bits & _OFF:  # NoteOff: the open slot holding that pitch ends now
            off = (self.slot_pitch == p.unsqueeze(1)) & (self.slot_end == NEVER) & self.is_off[new].unsqueeze(1)
            self.slot_end = torch.where(off, self.now.unsqueeze(1), self.slot_end)

    # ------------------------------------------------------------ masks

    def mask(self, last: torch.Tensor, remaining: int | None = None) -> torch.Tensor:
        """(B, V) bool: True where the next token is allowed. `remaining`: tokens left including this one."""
        if not self.enabled:
            return torch.ones(last.shape[0], self.V, dtype=torch.bool, device=last.device)
        m = self.allowed[last]  # (B, V), a fresh tensor (advanced indexing copies)
        lasts = last.tolist() if self._host else None

        def may(table: list[bool]) -> bool:  # may any row's next token be of this kind (always True on a GPU)
            return lasts is None or any(table[t] for t in lasts)

        now, limit = self.now, self._limit()
        if may(self._may_pitch):
            sounding = self.slot_end > now.unsqueeze(1)  # (B, n)
            slot_pitch = self.slot_pitch.masked_fill(~sounding, _NO_PITCH)  # (B, n)
            # Hall: windows already holding as many notes as strings take no new note whose strings lie inside.
            count = self.W[slot_pitch].sum(1)  # (B, windows)
            blocked = (count >= self.win_size).float() @ self.Wt > 0  # (B, 129)
            blocked |= self.unplayable
            blocked.scatter_(1, slot_pitch, True)  # never re-strike a sounding pitch
            at_end = now + self.min_step[self.tpb] > limit  # (B,) no room for another note before the limit
            m[:, self.pitch_cols] &= ~(blocked[:, self.pitch_cols_val] | at_end.unsqueeze(1))
        if self.kind == "MIDILike":
            open_pitch = self.slot_pitch.masked_fill(self.slot_end != NEVER, _NO_PITCH)
            active = torch.zeros(m.shape[0], _NO_PITCH + 1, dtype=torch.bool, device=m.device)
            active.scatter_(1, open_pitch, True)
            active[:, _NO_PITCH] = False
            m[:, self.off_cols] &= active[:, self.off_cols_val]
            n_open = (self.slot_end == NEVER).sum(1)  # (B,)
            m[:, self.eos] &= n_open == 0
            if remaining is not None:  # close every note in time: NoteOn Velocity TimeShift + n+1 NoteOffs
                m[:, self.pitch_cols] &= (n_open + 4 <= remaining).unsqueeze(1)
                m[:, self.time_cols] &= (n_open + 1 <= remaining).unsqueeze(1)
        # Time signatures: REMI right after a Bar; others before the first note.
        if may(self._may_ts):
            ts_ok = self.is_bar[last] if self.kind == "REMI" else ~self.started & ~self.had_ts & (self.now == 0)
            m[:, self.ts_cols] &= ts_ok.unsqueeze(1)
            if self.kind == "REMI" and self.max_bars is not None:  # a shorter bar must not strand ringing notes
                left = (self.max_bars - (self.bars - self.bars_at_start) + 1).clamp(min=1)
                new_limit = self.bar_start.unsqueeze(1) + self.ts_bar[self.ts_cols] * left.unsqueeze(1)  # (B, nTS)
                m[:, self.ts_cols] &= new_limit >= self.slot_end.max(1, keepdim=True).values
        if may(self._may_pos):  # REMI Position: forward, inside the bar, a string free on arrival
            pv = self.pos_cols_val.unsqueeze(0)  # (1, nP)
            t = self.bar_start.unsqueeze(1) + pv * self.tpp.unsqueeze(1)  # (B, nP)
            ok = (pv > self.pos.unsqueeze(1)) & (pv * self.tpp.unsqueeze(1) < self.bar_ticks.unsqueeze(1))
            ok &= self._free_at(t) & (t + self.min_step[self.tpb].unsqueeze(1) <= limit.unsqueeze(1))
            m[:, self.pos_cols] &= ok
        if may(self._may_shift):  # TimeShift: not past the bar limit
            t = now.unsqueeze(1) + self.shift_ticks[self.tpb]  # (B, nS)
            ok = t <= limit.unsqueeze(1)
            ok &= self.started.unsqueeze(1) | (t + self.min_step[self.tpb].unsqueeze(1) <= limit.unsqueeze(1))
            if self.step_needs_note:
                ok &= self._free_at(t) & (t + self.min_step[self.tpb].unsqueeze(1) <= limit.unsqueeze(1))
            m[:, self.shift_cols] &= ok
        if self.max_bars is not None:  # nothing rings past the last bar
            if may(self._may_dur):
                m[:, self.dur_cols] &= now.unsqueeze(1) + self.dur_ticks[self.tpb] <= limit.unsqueeze(1)
            finished = (now >= limit).unsqueeze(1) & ~self.is_vel[last].unsqueeze(1) & ~self.is_pitch[last].unsqueeze(1)
            keep = self.is_off | self.is_eos | self.is_vel | self.is_dur  # finish notes, then end
            m &= ~finished | keep
        # No empty riffs: EOS (and, in the last bar, a REMI Bar, which becomes EOS) only after a note.
        m[:, self.eos] &= self.started
        if self.kind == "REMI" and self.max_bars is not None:
            m[:, self.bar_cols] &= (self.started | (self.bars - self.bars_at_start < self.max_bars)).unsqueeze(1)
        m[~m.any(1), self.eos] = True  # a dead end can always finish
        return m

    def _free_at(self, t: torch.Tensor) -> torch.Tensor:
        """(B, K) bool: fewer notes than strings still sound at each tick t (B, K) (then some pitch fits)."""
        ringing = (self.slot_end.unsqueeze(1) > t.unsqueeze(2)).sum(-1)  # (B, K)
        return ringing < self.n_strings


# ---------------------------------------------------------------- generation
