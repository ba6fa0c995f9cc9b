"""sample: KV-cached, batched, grammar- and guitar-constrained generation, and riffs rendered to MIDI + tab."""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guitarformer.data.score import GUITAR_PROGRAM, MAX_FRET, STANDARD_TUNING, GuitarScore
from guitarformer.models.fast_decode import DecodeStep


# ---------------------------------------------------------------- constraints


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
        import symusic

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


def _filter_logits(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    logits = logits / max(temperature, 1e-8)
    if top_k:
        k = min(int(top_k), logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(-1) - probs > top_p  # keep the smallest set whose mass reaches top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                generator: torch.Generator | None = None, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from last-position logits (B, V); temperature 0 is greedy."""
    logits = logits.float()
    if allowed is not None:
        logits = logits.masked_fill(~allowed, float("-inf"))
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(_filter_logits(logits, temperature, top_k, top_p), dim=-1)
    if generator is not None and generator.device != probs.device:  # a CPU generator: draw on CPU (reproducible)
        return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


SMALL_STEP_WORK = 32_000_000  # parameters x rows per decoding step below which one CPU thread is fastest


def _one_thread_for_small_steps(fn):
    """Run `fn(model, prompt_ids, ...)` with one intra-op thread on CPU when a decoding step is small.

    A one-token step of a small model is ~100 ops of a few microseconds each: too little to share between
    threads, and every op that opens a parallel region waits for all of them. When another process keeps a
    core busy that wait dominates (2 threads: 14.4 s vs 2.0 s for the same 16-bar riff from the default model
    with the other core busy). The previous setting is restored afterwards.
    """

    @functools.wraps(fn)
    def wrapper(model, prompt_ids, *args, **kwargs):
        param = next(model.parameters())
        shape = torch.as_tensor(prompt_ids).shape
        rows = shape[0] if len(shape) > 1 else 1
        before = torch.get_num_threads()
        small = param.device.type == "cpu" and before > 1 and \
            sum(p.numel() for p in model.parameters()) * rows <= SMALL_STEP_WORK
        if not small:
            return fn(model, prompt_ids, *args, **kwargs)
        torch.set_num_threads(1)
        try:
            return fn(model, prompt_ids, *args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper


@_one_thread_for_small_steps
@torch.inference_mode()  # cheaper than no_grad per op: matters at one token per step
def generate(model, prompt_ids, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, generator: torch.Generator | None = None, use_cache: bool = True,
             constraint: GuitarConstraint | None = None, eos_id: int | None = None, max_bars: int | None = None,
             bar_ids: list[int] | None = None, src: torch.Tensor | None = None,
             src_key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Continue prompt_ids (B, T0) by up to max_new_tokens; returns (B, T0 + n) ids.

    Decoder: the prompt is the context. Encoder-decoder: pass `src` (B, S); the prompt starts the target
    (usually [BOS]). Rows that reach EOS (or finish `max_bars` bars) are padded with EOS afterwards.
    Past the context length the window slides: the cache is rebuilt from the last half of the context.
    With a constraint, `max_bars` is enforced by its masks (any tokenizer); Bar tokens past the limit
    (REMI) become EOS either way.
    """
    model.eval()
    device = next(model.parameters()).device
    idx = torch.as_tensor(prompt_ids, dtype=torch.long, device=device)
    if idx.dim() == 1:
        idx = idx.unsqueeze(0)
    B, T0 = idx.shape
    ctx = model.config.block_size
    is_encdec = src is not None
    memory = None
    if is_encdec:
        src = torch.as_tensor(src, dtype=torch.long, device=device)
        memory = model.encode(src, src_key_mask)
    if constraint is not None:
        # An encoder-decoder's target continues its source in time: the state (time signature, bar count,
        # notes still ringing on their strings) starts from the source (padding tokens change nothing).
        constraint.start(torch.cat([src, idx], 1) if is_encdec else idx, max_bars)
    # One buffer for the whole output: no per-step concatenation.
    out = torch.empty(B, T0 + max_new_tokens, dtype=torch.long, device=device)
    out[:, :T0] = idx
    bar_t = torch.tensor(bar_ids or [], dtype=torch.long, device=device)
    check_bars = max_bars is not None and bar_t.numel() > 0
    bars_seen = torch.zeros(B, dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    eos = torch.full((B,), eos_id if eos_id is not None else 0, dtype=torch.long, device=device)
    sync_every = 1 if device.type == "cpu" else 8  # `done.all()` waits for the GPU: ask now and then

    def run(tokens: torch.Tensor, cache):
        if is_encdec:
            return model.decode(tokens, memory, src_key_mask, cache=cache)
        return model(tokens, cache=cache)[0]

    cache = step_fn = None
    if use_cache:
        cache = model.new_cache(B, ctx, device=device)
        logits = run(idx[:, -ctx:], cache)[:, -1]
        step_fn = DecodeStep(model)  # one token per step without module calls: same math, ~1.3x faster on CPU
    n = T0
    for step in range(max_new_tokens):
        if not use_cache:
            logits = run(out[:, max(0, n - ctx):n], None)[:, -1]
        allowed = constraint.mask(out[:, n - 1], max_new_tokens - step) if constraint is not None else None
        nxt = sample_next(logits, temperature, top_k, top_p, generator, allowed)
        if check_bars:
            bars_seen += torch.isin(nxt, bar_t) & ~done
            over = bars_seen > max_bars
            if eos_id is not None:
                nxt = torch.where(over, eos, nxt)
            done |= over
        if eos_id is not None:
            nxt = torch.where(done, eos, nxt)
            done |= nxt == eos_id
        out[:, n] = nxt
        n += 1
        if constraint is not None:
            constraint.update(nxt)
        if eos_id is not None and (step + 1) % sync_every == 0 and bool(done.all()):
            break
        if step + 1 == max_new_tokens:
            break
        if use_cache:
            if cache.length >= ctx:  # context full: slide, rebuild the cache from the last half
                cache = model.new_cache(B, ctx, device=device)
                logits = run(out[:, n - ctx // 2:n], cache)[:, -1]
            else:
                logits = step_fn(nxt, cache, src_key_mask)
    return out[:, :n]


# ---------------------------------------------------------------- riffs


@dataclass
class Riff:
    ids: list[int]
    gs: GuitarScore
    frets: list[tuple[int, int]] = field(default_factory=list)


def load_run(run: str | Path | None = None, checkpoint: str | Path | None = None, device: str = "cpu"):
    """(model, tokenizer, cfg) from a run directory (best, else last checkpoint) or a checkpoint file."""
    from guitarformer.checkpoint import load_checkpoint
    from guitarformer.config import from_dict
    from guitarformer.data.tokenization import load_tokenizer
    from guitarformer.errors import GuitarformerError
    from guitarformer.models import build_model
    from guitarformer.train import newest_run

    if checkpoint is None:
        run_dir = Path(run) if run else newest_run()
        ck = run_dir / "ckpt" / "best.pt"
        if not ck.is_file():
            ck = run_dir / "ckpt" / "last.pt"
        if not ck.is_file():
            raise GuitarformerError(f"run {run_dir} has no checkpoint (ckpt/best.pt or ckpt/last.pt)",
                                    "train it first, or pass --checkpoint FILE")
    else:
        ck = Path(checkpoint)
        run_dir = ck.parent.parent
    state = load_checkpoint(ck)
    cfg = from_dict(state["config"])
    tok_path = run_dir / "tokenizer.json"
    if not tok_path.is_file():
        raise GuitarformerError(f"no tokenizer.json beside {ck}", "keep checkpoints inside their run directory (ckpt/..)")
    tokenizer = load_tokenizer(tok_path)
    model = build_model(cfg.model)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise GuitarformerError(f"checkpoint {ck} does not match its own config ({str(e).splitlines()[0][:200]})",
                                "use the checkpoint with the run directory (config.yaml) it was trained in") from None
    model.to(device).eval()
    return model, tokenizer, cfg


def generate_riffs(model, tokenizer, cfg, device="cpu", num: int = 1, seed: int = 0, max_new_tokens: int = 512,
                   temperature: float = 1.0, top_k: int | None = None, top_p: float | None = 0.95,
                   prompt: list[int] | None = None, bars: int | None = None,
                   tuning: tuple[int, ...] = STANDARD_TUNING, tempo: float | None = None,
                   program: int = GUITAR_PROGRAM, use_cache: bool = True, position: int | None = None) -> list[Riff]:
    """Sample `num` riffs in one batch. A decoder continues `prompt` (ids, BOS first); an encoder-decoder
    encodes it as the source and writes the continuation. Returns decoded, fretted riffs (in `position` if given,
    see `tab.fret`)."""
    from guitarformer.data.tokenization import bar_ids, decode, special_ids

    sp = special_ids(tokenizer)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    constraint = GuitarConstraint(tokenizer, tuning, device=device)
    is_encdec = cfg.model.kind == "encoder_decoder"
    if is_encdec:
        src_ids = list(prompt or [sp["bos"]])[-cfg.model.src_block_size:]
        src = torch.tensor([src_ids] * num, dtype=torch.long)
        start = torch.full((num, 1), sp["bos"], dtype=torch.long)
        kw = {"src": src.to(device), "src_key_mask": torch.ones_like(src, dtype=torch.bool).to(device)}
    else:
        src_ids = []
        start = torch.tensor([list(prompt or [sp["bos"]])] * num, dtype=torch.long)
        kw = {}
    # The generator lives on CPU, so the same seed gives the same riff on every device.
    out = generate(model, start.to(device), max_new_tokens, temperature, top_k, top_p, gen, use_cache,
                   constraint, sp["eos"], bars, bar_ids(tokenizer), **kw)
    riffs = []
    for row in out.tolist():
        body = row if not is_encdec else src_ids + row  # the continuation is heard after its source
        score = decode(tokenizer, body, program=program, tempo=tempo)
        score = clamp_to_tuning(score, tuning)
        gs = GuitarScore(score=score, tuning=tuple(tuning), name="riff", source_format="generated")
        frets = fret_score(gs, position)
        gs.frets = frets
        riffs.append(Riff(ids=row, gs=gs, frets=frets))
    return riffs


def clamp_to_tuning(score, tuning: tuple[int, ...]):
    """Lenient repair: notes outside the tuning's range move by octaves into it; at most len(tuning) notes
    start together (the highest-velocity ones kept)."""
    import symusic

    lo, hi = min(tuning), max(tuning) + MAX_FRET
    for tr in score.tracks:
        notes = []
        for n in tr.notes:
            p = n.pitch
            while p < lo:
                p += 12
            while p > hi:
                p -= 12
            notes.append((n.time, n.duration, p, n.velocity))
        by_onset: dict[int, list] = {}
        for n in notes:
            by_onset.setdefault(n[0], []).append(n)
        kept = []
        for t, group in by_onset.items():
            uniq = {}
            for n in group:
                uniq.setdefault(n[2], n)  # one note per pitch
            kept.extend(sorted(uniq.values(), key=lambda n: -n[3])[: len(tuning)])
        tr.notes.clear()
        tr.notes.extend([symusic.Note(*n) for n in sorted(kept)])
    return score


def fret_score(gs: GuitarScore, position: int | None = None) -> list[tuple[int, int]]:
    from guitarformer.tab import fret

    return fret(list(gs.track.notes), gs.tuning, gs.capo, position=position, program=gs.track.program)


def render_media(riff: Riff, fs: int = 16000) -> dict[str, Any]:
    """Piano roll (H, W uint8), audio (float32 in [-1, 1]) and ASCII tab of a riff, for TensorBoard."""
    import pretty_midi

    pm = pretty_midi.PrettyMIDI(io.BytesIO(riff.gs.score.dumps_midi()))
    roll = pm.get_piano_roll(fs=16)[28:100][::-1]  # guitar-ish range, high notes on top
    img = (np.clip(roll / 127.0, 0, 1) * 255).astype(np.uint8) if roll.size else np.zeros((72, 1), np.uint8)
    audio = None
    if pm.instruments and pm.instruments[0].notes:
        audio = pm.synthesize(fs=fs).astype(np.float32)[: fs * 30]
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        audio = (audio / peak * 0.9 if peak > 0 else audio).reshape(1, -1)
    from guitarformer.tab import render_ascii_tab

    return {"piano_roll": img, "audio": audio, "sample_rate": fs, "tab": render_ascii_tab(riff.gs, riff.frets)}


def generate_riff(model, tokenizer, cfg, device, seed: int = 0, max_new_tokens: int = 256) -> Riff:
    s = cfg.sample
    return generate_riffs(model, tokenizer, cfg, device, 1, seed, max_new_tokens, s.temperature, s.top_k or None,
                          s.top_p)[0]


def parse_tuning(spec: str) -> tuple[int, ...]:
    """A tuning name (standard, drop-d, ...) or MIDI numbers low to high ("38,45,50,55,59,64")."""
    from guitarformer.data.score import TUNINGS
    from guitarformer.errors import GuitarformerError

    key = spec.strip().lower().replace("_", "-").replace(" ", "-")
    if key in TUNINGS:
        return TUNINGS[key]
    try:
        notes = tuple(int(x) for x in spec.split(","))
    except ValueError:
        notes = ()
    if not 4 <= len(notes) <= 8 or not all(20 <= n <= 90 for n in notes):
        raise GuitarformerError(f"unknown tuning {spec!r}",
                                f"use one of {', '.join(TUNINGS)} or MIDI numbers low to high, e.g. 38,45,50,55,59,64")
    return tuple(sorted(notes))


def prompt_ids(tokenizer, path: Path) -> list[int]:
    """Token ids (BOS, no EOS) of the first guitar part of a MIDI/GP/tab/MusicXML file."""
    from guitarformer.data.io import read_guitar
    from guitarformer.data.tokenization import encode
    from guitarformer.errors import GuitarformerError

    if not Path(path).is_file():
        raise GuitarformerError(f"prompt file {path} does not exist", "pass a MIDI, Guitar Pro, tab or MusicXML file")
    try:
        parts = read_guitar(Path(path))
        ids = encode(tokenizer, parts[0])[:-1] if parts else []
    except Exception as e:
        raise GuitarformerError(f"prompt {path} is not readable music ({type(e).__name__}: {e})",
                                "pass a MIDI, Guitar Pro (gp3-5), ASCII tab or MusicXML file with notes") from None
    if len(ids) <= 1:
        raise GuitarformerError(f"prompt {path} has no notes", "pass a file with a guitar part that has notes")
    return ids


def write_riffs(out: Path, run_dir=None, checkpoint=None, num_samples: int = 1, max_new_tokens=None, bars=None,
                temperature=None, top_k=None, top_p=None, seed: int = 0, prompt=None, tempo=None,
                tuning: str = "standard", program=None, tab_out=None, gp_out=None, device: str = "auto",
                echo=print, batch_size: int | None = None, wav_out=None, position: int | None = None) -> list[Path]:
    """The `sample` command: load, generate in batches of `batch_size`, write MIDI (+ tab, GP5, WAV), report.

    Batch k (0-based) is seeded with seed + k, so a run is reproducible for a given batch size."""
    from guitarformer.data.io import write_midi
    from guitarformer.errors import GuitarformerError
    from guitarformer.tab import write_ascii_tab, write_gp5
    from guitarformer.train import resolve_device

    out = Path(out)
    if out.suffix.lower() not in (".mid", ".midi"):
        raise GuitarformerError(f"--out {out} should be a MIDI file", "give it a .mid extension, e.g. --out riff.mid")
    synth = find_synth() if wav_out else None  # fail before the slow part
    dev = resolve_device(device)
    model, tokenizer, cfg = load_run(run_dir, checkpoint, str(dev))
    s = cfg.sample
    tun = parse_tuning(tuning)
    p_ids = prompt_ids(tokenizer, prompt) if prompt else None
    if p_ids and cfg.model.kind == "decoder":
        p_ids = p_ids[-(cfg.model.block_size // 2):]
    bs = max(1, min(batch_size or num_samples, num_samples))
    riffs: list[Riff] = []
    for k, first in enumerate(range(0, num_samples, bs)):
        riffs += generate_riffs(
            model, tokenizer, cfg, dev, min(bs, num_samples - first), seed + k, max_new_tokens or s.max_new_tokens,
            s.temperature if temperature is None else temperature, (s.top_k if top_k is None else top_k) or None,
            s.top_p if top_p is None else top_p, p_ids, bars, tun, tempo,
            program if program is not None else GUITAR_PROGRAM, position=position)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GuitarformerError(f"cannot create the folder for {out}: {e.strerror or e}",
                                "choose an --out path in a writable folder") from None
    written = []
    for i, r in enumerate(riffs):
        path = _numbered(out, i, len(riffs))
        write_midi(r.gs, path)
        written.append(path)
        extra = []
        if tab_out:
            tp = _numbered(Path(tab_out), i, len(riffs))
            write_ascii_tab(r.gs, tp)
            extra.append(str(tp))
        if gp_out:
            gp = _numbered(Path(gp_out), i, len(riffs))
            write_gp5(r.gs, gp, r.frets)
            extra.append(str(gp))
        if wav_out:
            wp = _numbered(Path(wav_out), i, len(riffs))
            render_wav(path, wp, synth)
            extra.append(str(wp))
        notes = list(r.gs.track.notes)
        score = r.gs.score
        n_bars = _count_bars(score)
        rng = f"{_name(min(n.pitch for n in notes))}-{_name(max(n.pitch for n in notes))}" if notes else "-"
        echo(f"{path}: {n_bars} bars, {len(notes)} notes, range {rng}" + (f"; {', '.join(extra)}" if extra else ""))
    return written


SOUNDFONT_PLACES = (
    "/usr/share/sounds/sf2/FluidR3_GM.sf2", "/usr/share/sounds/sf2/default-GM.sf2", "/usr/share/soundfonts/default.sf2",
    "/usr/share/soundfonts/FluidR3_GM.sf2", "/usr/share/sounds/sf2/TimGM6mb.sf2", "/usr/local/share/soundfonts/default.sf2",
    "/opt/homebrew/share/soundfonts/default.sf2", "/usr/local/share/fluidsynth/default.sf2",
)


def find_synth() -> tuple[str, str]:
    """(fluidsynth binary, General MIDI .sf2): $GUITARFORMER_SOUNDFONT first, then the usual places."""
    import os
    import shutil

    from guitarformer.errors import GuitarformerError

    exe = shutil.which("fluidsynth")
    env = os.environ.get("GUITARFORMER_SOUNDFONT")
    places = [env] if env else []
    places += list(SOUNDFONT_PLACES) + sorted(str(p) for d in ("/usr/share/sounds/sf2", "/usr/share/soundfonts")
                                              for p in Path(d).glob("*.sf2"))
    sf2 = next((p for p in places if p and Path(p).is_file()), None)
    if exe is None or sf2 is None:
        missing = "the fluidsynth program" if exe is None else "a General MIDI soundfont (.sf2)"
        raise GuitarformerError(f"--wav needs {missing}, which was not found",
                                "install fluidsynth and a GM soundfont (e.g. apt install fluidsynth fluid-soundfont-gm), "
                                "or set GUITARFORMER_SOUNDFONT=/path/to/font.sf2")
    if env and sf2 != env:
        raise GuitarformerError(f"GUITARFORMER_SOUNDFONT={env} is not a file", "point it at a .sf2 soundfont")
    return exe, sf2


def render_wav(midi: Path, wav: Path, synth: tuple[str, str], rate: int = 44100) -> None:
    """MIDI -> WAV with FluidSynth (no audio device: -n -i, file renderer only)."""
    import subprocess

    from guitarformer.errors import GuitarformerError

    exe, sf2 = synth
    wav.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([exe, "-ni", "-F", str(wav), "-r", str(rate), sf2, str(midi)], capture_output=True, text=True)
    if r.returncode != 0 or not wav.is_file():
        raise GuitarformerError(f"fluidsynth failed on {midi}: {(r.stderr or r.stdout).strip()[-200:]}",
                                "check the soundfont with `fluidsynth -ni FONT.sf2 FILE.mid`")


def _numbered(p: Path, i: int, n: int) -> Path:
    return p if n == 1 else p.with_name(f"{p.stem}_{i:03d}{p.suffix}")


def _count_bars(score) -> int:
    """Bars up to the score's end, following its time signatures (4/4 before the first)."""
    end = score.end()
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures)
    tick, bars, num, den = 0, 0, 4, 4
    while tick < end:
        for t, a, b in sigs:
            if t <= tick:
                num, den = a, b
        tick += max(1, score.ticks_per_quarter * 4 * num // den)
        bars += 1
    return bars


def _name(pitch: int) -> str:
    names = ["C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B"]
    return f"{names[pitch % 12]}{pitch // 12 - 1}"
