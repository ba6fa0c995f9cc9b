"""Tab layout 3, where a note on its lowest-fret string has no String token: tab_model.py's beam search for it.

A row chooses each note's string at the note's Duration: writing a String for a string off the lowest fret costs
the row a step, the lowest string none (the row reads the next teacher-forced token at once), so the rows of a
window drift apart, each with its own pointer into the window's tokens, and beam search ranks them against
reference costs of the window's slots rather than by their log-likelihoods as they stand (tab_model.py's module
docstring says why and how). `_plan3` lays out the windows, `refinger_batch3` runs the search (its state and
steps: `_Search3`), `_extend_reference` and `_beam_select` are its ranking. Apart from tab_model.py, which keeps
the public API and layout 2's search and calls `refinger_batch3` for layout 3; the machinery both layouts share
is tab_rows.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from guitarformer.vocab.tab_tokens import MAX_STRINGS
from guitarformer.fingering.tab_rows import (ChoiceTables, RowGroup, SlotCache, TabVocab, allowed_strings,
                                             reorder_rows, start_groups)
from guitarformer.generation.constraint.grammar import NO_PITCH


@dataclass
class _Plan3:
    """Layout 3's teacher-forced windows of one `refinger_batch3` call, one row per window, (W, longest + 1):
    `teach` the window's ids without Strings (PAD from its end on), `length` (W,) how many, `note` where a note's
    Duration is, `pitch` and `low` that note's pitch and lowest-fret string index, `later[(w, i)]` the fit masks
    of the onset's notes after the one whose Duration is at i, `steps` the most tokens a row may read (its window
    with a String after every note)."""

    teach: torch.Tensor
    length: torch.Tensor
    note: torch.Tensor
    pitch: torch.Tensor
    low: torch.Tensor
    later: dict[tuple[int, int], tuple[int, ...]]
    steps: int


@dataclass(frozen=True)
class _Choosing:
    """One step's string choice (`_Search3._greedy`): `rs` the rows that choose (as a tensor, and `rows` as a list),
    `lows` their lowest-fret string indexes and `ok` the strings they may take (None where no row chooses); per row
    of the batch, `low_all` its lowest-fret string index (0 where it does not choose) and `first` its greedy option
    (0: read on)."""

    rs: torch.Tensor
    rows: list[int]
    lows: torch.Tensor | None
    ok: torch.Tensor | None
    low_all: torch.Tensor
    first: torch.Tensor


def _plan3(v: TabVocab, windows: list[list[int]], win_groups: list[RowGroup]) -> _Plan3:
    W, L = len(windows), max(len(r) for r in windows)
    teach = torch.full((W, L + 1), v.pad, dtype=torch.long)
    note = torch.zeros(W, L + 1, dtype=torch.bool)
    pitch = torch.full((W, L + 1), NO_PITCH, dtype=torch.long)
    low = torch.zeros(W, L + 1, dtype=torch.long)
    later: dict[tuple[int, int], tuple[int, ...]] = {}
    steps = 0
    for w, row in enumerate(windows):
        g = win_groups[w]
        teach[w, :len(row)] = torch.tensor(row)
        ends = v.note_ends(row)
        steps = max(steps, len(row) + sum(ends))
        onset: list[tuple[int, int]] = []  # (Duration position, pitch) of the notes since the last Bar/Position
        for j in range(len(row) + 1):
            if j == len(row) or row[j] in v.onset:
                for k, (jj, _) in enumerate(onset):
                    if k + 1 < len(onset):
                        later[(w, jj)] = tuple(g.fit_bits[p] for _, p in onset[k + 1:])
                onset = []
            elif ends[j]:
                p = v.note_pitch(row, j)
                note[w, j], pitch[w, j], low[w, j] = True, p, g.lowest[p]
                onset.append((j, p))
    return _Plan3(teach, torch.tensor([len(r) for r in windows]), note, pitch, low, later, steps)


def refinger_batch3(model, v: TabVocab, windows: list[list[int]], win_groups: list[RowGroup], device: torch.device,
                     beam: int = 1) -> list[tuple[list[int], float]]:
    """Layout 3's `_refinger_batch`: teacher-force the windows (ids without String tokens), `beam` rows per window,
    each row with its own pointer into its window's tokens, choosing every note's string at its Duration (module
    docstring); returns, per window, the tokens its best row read (the window with its chosen Strings) and that
    row's score (its log-likelihood; 0.0 with beam 1)."""
    search = _Search3(model, v, windows, win_groups, device, beam)
    for t in range(search.S):
        if not search.step(t):
            break
    return search.result()


class _Search3:
    """One `refinger_batch3` call: row w * K + j is beam j of window w. Fixed: the plan's tensors on the device
    (`win` each row's window, `n_teach` its window's length) and the token tables (`tables`: what `allowed_strings`
    reads). Per row, moved with it when beam search re-ranks the rows: `taken` the strings taken at the current
    onset, `nxt` the token it reads at this step, `ptr` the teacher tokens decided (the next is teach[ptr]), `fed`
    the teacher index of the token read now (-1: a String, PAD), `out` what it has read; beam search (K > 1):
    `score` its log-likelihood (one row per window starts, as in `_refinger_batch`), `slots` the slots it has
    decided, and per window `ref` the reference cost of its slots, cumulative, `front` how many of them are known
    (module docstring)."""

    def __init__(self, model, v: TabVocab, windows: list[list[int]], win_groups: list[RowGroup], device: torch.device,
                 beam: int) -> None:
        K, W = beam, len(windows)
        plan = _plan3(v, windows, win_groups)
        teach, length, note, pitch, low = (t.to(device) for t in (plan.teach, plan.length, plan.note, plan.pitch,
                                                                  plan.low))
        S, B = plan.steps, W * K
        self.model, self.v, self.device = model, v, device
        self.K, self.W, self.S, self.B, self.pad_at = K, W, S, B, teach.shape[1] - 1
        self.teach, self.note, self.pitch, self.low = teach, note, pitch, low
        self.win = torch.arange(B, device=device) // K  # each row's window
        self.n_teach = length[self.win]
        self.string_ids = torch.tensor(v.string_ids, device=device)
        self.not_string = torch.tensor(v.not_string, device=device)
        self.onset_ids = torch.tensor(sorted(v.onset), device=device)
        self.groups, self.local = start_groups(win_groups, K, torch.zeros(B, 0, dtype=torch.long, device=device),
                                                device)
        self.tables = ChoiceTables(v, win_groups, self.groups, plan.later, self.string_ids)
        self.taken = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)
        self.nxt = teach[self.win, 0]
        self.ptr = torch.ones(B, dtype=torch.long, device=device)
        self.fed = torch.zeros(B, dtype=torch.long, device=device)
        self.out = torch.full((B, S), v.pad, dtype=torch.long, device=device)
        score = torch.zeros(W, K, dtype=torch.float64, device=device)
        score[:, 1:] = float("-inf")
        self.score = score.view(B)
        self.slots = torch.ones(B, dtype=torch.long, device=device)  # the window's first token is decided, unscored
        self.ref = torch.zeros(W, S + 3, dtype=torch.float64, device=device)  # ref[w, k]: the costs of slots 0 .. k-1
        self.front = torch.ones(W, dtype=torch.long, device=device)
        self.cache = SlotCache(model, B, S, device)

    def step(self, t: int) -> bool:
        """Every row reads its token `nxt`; then, unless the search is over (False), the rows that just read a
        note's Duration choose its string (beam search re-ranking the rows) and every row moves on."""
        tok = self.nxt
        self.out[:, t] = tok
        logits = self.cache.read(tok.unsqueeze(1))[:, -1]  # (B, V)
        for g, grs in self.groups.values():
            g.constraint.update(tok[grs])
        self.taken &= ~torch.isin(tok, self.onset_ids).unsqueeze(1)
        if t + 1 >= self.S:
            return False
        at_end = self.ptr >= self.n_teach  # every teacher token decided
        x = self.teach[self.win, self.ptr.clamp(max=self.pad_at)]  # the next teacher token (PAD at the window's end)
        at = self.fed.clamp(min=0)
        choosing = (self.fed >= 0) & self.note[self.win, at]  # the row just read a note's Duration: it chooses now
        rs = choosing.nonzero().squeeze(1)
        rows = rs.tolist()
        if not rows and bool(at_end.all()):
            return False  # every row has read its whole window
        choice = self._greedy(tok, logits, rs, rows, at)
        pick, low_all = choice.first, choice.low_all
        if self.K > 1:
            pick, at_end, x, choosing, low_all = self._rank(logits, x, at_end, choosing, choice)
        writes = choosing & (pick != low_all)  # a String for a string off the lowest fret
        self.nxt = torch.where(writes, self.string_ids[pick], x)
        reads = ~writes & ~at_end
        self.fed = torch.where(reads, self.ptr, -1)
        self.ptr = self.ptr + reads.long()
        cr = choosing.nonzero().squeeze(1)
        self.taken[cr, pick[cr]] = True
        return True

    def _greedy(self, tok: torch.Tensor, logits: torch.Tensor, rs: torch.Tensor, rows: list[int], at: torch.Tensor
                ) -> _Choosing:
        """The choice of the rows `rs` (`rows`) that just read a note's Duration: each row's lowest-fret string
        index and greedy option, the choosing rows' strings they may take (`_Choosing`)."""
        B, device, string_ids = self.B, self.device, self.string_ids
        low_all = torch.zeros(B, dtype=torch.long, device=device)
        first = torch.zeros(B, dtype=torch.long, device=device)
        if not rows:
            return _Choosing(rs, rows, None, None, low_all, first)
        win = self.win
        lows = self.low[win[rs], at[rs]]
        low_all[rs] = lows
        ok = allowed_strings(self.tables, rs, [(r // self.K, j) for r, j in zip(rows, self.fed[rs].tolist())], tok,
                             self.pitch[win[rs], at[rs]], self.taken, lows)
        ar = torch.arange(len(rows), device=device)
        lg = logits[rs]
        options = lg.index_select(1, string_ids)  # the lowest string's: the note ends (no String)
        options[ar, lows] = lg.index_select(1, self.not_string).logsumexp(1)
        first[rs] = options.masked_fill(~ok, float("-inf")).argmax(1)
        return _Choosing(rs, rows, lows, ok, low_all, first)

    def _candidates(self, logits: torch.Tensor, x: torch.Tensor, at_end: torch.Tensor, choosing: torch.Tensor,
                    choice: _Choosing) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Beam search's candidates (B, C), C options per row (a choosing row's strings; a row that reads on has
        one, column 0): the log-likelihood after each (-inf for none), the slots decided after it, and the costs
        of its first and second new slot."""
        B, device, score = self.B, self.device, self.score
        rs, rows, lows, ok = choice.rs, choice.rows, choice.lows, choice.ok
        C = MAX_STRINGS if rows else 1
        logp = logits.double().log_softmax(-1)  # float64 as in `_refinger_batch`
        x_cost = torch.where(at_end, 0.0, logp.gather(1, x.unsqueeze(1)).squeeze(1))
        raw = torch.full((B, C), float("-inf"), dtype=torch.float64, device=device)  # the log-likelihood after
        raw[:, 0] = torch.where(choosing, float("-inf"), score + x_cost)
        span = torch.zeros(B, C, dtype=torch.long, device=device)  # the slots each candidate decides (0 .. 2)
        span[:, 0] = (~at_end).long()
        c1 = torch.zeros(B, C, dtype=torch.float64, device=device)  # their costs
        c1[:, 0] = x_cost
        c2 = torch.zeros(B, C, dtype=torch.float64, device=device)
        if rows:
            ar = torch.arange(len(rows), device=device)
            lp = logp[rs]
            o = lp.index_select(1, self.string_ids)
            mass = lp.index_select(1, self.not_string).logsumexp(1)  # log p(no String): the lowest string
            o[ar, lows] = mass
            ends = at_end[rs]
            cand = score[rs].unsqueeze(1) + o
            cand[ar, lows] = score[rs] + torch.where(ends, mass, x_cost[rs])  # with the token read after it
            raw[rs] = cand.masked_fill(~ok, float("-inf"))
            sp = torch.ones(len(rows), C, dtype=torch.long, device=device)
            sp[ar, lows] += (~ends).long()
            span[rs] = sp
            c1[rs] = o
            cc = torch.zeros(len(rows), C, dtype=torch.float64, device=device)
            cc[ar, lows] = torch.where(ends, 0.0, x_cost[rs] - mass)
            c2[rs] = cc
        reached = (self.slots.unsqueeze(1) + span).clamp(max=self.S + 2)
        return raw, reached, c1, c2

    def _rank(self, logits: torch.Tensor, x: torch.Tensor, at_end: torch.Tensor, choosing: torch.Tensor,
              choice: _Choosing) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Beam search's step (K > 1): the reference extended by this step's candidates, and in each window that
        chooses, row 0 its greedy option and rows 1..K-1 the best other candidates by rank, every per-row state
        moved with its row. Returns each row's option and its `at_end`, `x`, `choosing`, `low_all`, moved."""
        raw, reached, c1, c2 = self._candidates(logits, x, at_end, choosing, choice)
        self.front = _extend_reference(self.ref, self.front, raw, self.slots, reached, c1, c2)
        rows, first, low_all = choice.rows, choice.first, choice.low_all
        if not rows:
            self.score, self.slots = raw[:, 0], reached[:, 0]
            return first, at_end, x, choosing, low_all
        K = self.K
        ws = sorted({r // K for r in rows})
        in_ws = torch.tensor([w * K + j for w in ws for j in range(K)], device=self.device)
        rank = raw[in_ws] - self.ref[self.win[in_ws].unsqueeze(1), reached[in_ws]]
        src, pick = _beam_select(ws, K, self.B, rank, first[in_ws])
        self.score, self.slots = raw[src, pick], reached[src, pick]
        reorder_rows(src, self.cache, self.groups.values(), self.local)
        self.ptr, self.taken, self.out = self.ptr[src], self.taken[src], self.out[src]
        return pick, at_end[src], x[src], choosing[src], low_all[src]

    def result(self) -> list[tuple[list[int], float]]:
        """Per window, the tokens its best row read and that row's score."""
        K, W = self.K, self.W
        best = self.score.view(W, K).argmax(1).tolist() if K > 1 else [0] * W  # the first of equals: the greedy row
        final = self.score.view(W, K).cpu().tolist()
        chosen = self.out.cpu().tolist()
        return [([i for i in chosen[w * K + best[w]] if i != self.v.pad], final[w][best[w]]) for w in range(W)]


def _extend_reference(ref: torch.Tensor, front: torch.Tensor, raw: torch.Tensor, slots: torch.Tensor,
                      reached: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor) -> torch.Tensor:
    """Layout 3's beam ranking: the reference costs of the slots this step's candidates reach first. Per window
    (rows (B,) in windows of K; candidates (B, C): `raw` score, -inf for none; `reached` the slots decided after
    it, `slots` (B,) before it, `c1` and `c2` the costs of its first and second new slot) the likeliest candidate
    of those that reach furthest leaves the costs of its slots past `front` (the slots already known) in `ref`
    (W, slots + 1, cumulative). Returns the new front."""
    W = ref.shape[0]
    raw_w, reach_w = raw.reshape(W, -1), reached.reshape(W, -1)
    live = raw_w > float("-inf")
    far = reach_w.masked_fill(~live, -1).max(1).values  # (W,)
    best = raw_w.masked_fill(reach_w != far.unsqueeze(1), float("-inf")).argmax(1, keepdim=True)  # (W, 1)
    start = slots.unsqueeze(1).expand_as(reached).reshape(W, -1).gather(1, best).squeeze(1)
    top = ref.shape[1] - 2
    for k_off, cost in ((0, c1), (1, c2)):
        k = start + k_off
        write = (far >= 0) & (k >= front) & (k < far)
        k = k.clamp(max=top).unsqueeze(1)
        now = ref.gather(1, k + 1)
        ref.scatter_(1, k + 1, torch.where(write.unsqueeze(1), ref.gather(1, k) + cost.reshape(W, -1).gather(1, best),
                                           now))
    return torch.maximum(front, far)


def _beam_select(ws: list[int], K: int, B: int, rank: torch.Tensor, first: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Layout 3's `_beam_step` over the rows of windows `ws` (K each; `rank` (rows, options): each candidate's rank,
    -inf for none; `first` each row's greedy option): row 0 of each window takes its own greedy option, rows
    1..K-1 the best other candidates. Returns the source row of every row of the batch (B,) and the option each
    takes (0, reading on, for the rows of other windows)."""
    C = rank.shape[1]
    cand = rank.view(len(ws), K * C)  # beam j's option s at j * C + s
    head = first.view(len(ws), K)[:, :1]  # row 0's own choice
    rest = cand.scatter(1, head, float("-inf")).sort(dim=1, descending=True, stable=True)
    pick = torch.cat([head, rest.indices[:, :K - 1]], 1)  # (len(ws), K)
    device = rank.device
    rows = torch.tensor([w * K + j for w in ws for j in range(K)], device=device)
    src = torch.arange(B, device=device)
    src[rows] = torch.tensor([w * K for w in ws], device=device).repeat_interleave(K) + pick.view(-1) // C
    option = torch.zeros(B, dtype=torch.long, device=device)
    option[rows] = pick.view(-1) % C
    return src, option
