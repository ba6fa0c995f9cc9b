"""The model fingers other music: a tab-token model chooses the string of every note of a file.

A TabREMI note is ``Pitch [Velocity] Duration String [Bend] [Tech ...]``: the string comes after everything
else about the note, so a decoder trained on tab tokens has, at each Duration, a distribution over the
strings that could play it. `refinger` reads a part's token ids with teacher forcing (every token as the file
has it) except String tokens, which the model chooses among those the guitar allows: with `beam=1` at each
String position the likeliest one, by default (`BEAM`) the strings of the likeliest whole window found by beam
search (below); a choice (never the String in the ids) is what the model reads next. The fret follows from
pitch, string, tuning and capo.

What the guitar allows is `GuitarConstraint`'s mask at that step (strings that can play the pitch in the part's
tuning and capo, and whatever else the constraint knows about strings still sounding), less the strings already
taken at the same onset, and those that would leave the onset's later notes (known ahead: teacher forcing) no
distinct strings (checked here, so a greedy choice never doubles a string in a chord). Where that leaves
nothing, the same without the constraint's mask, then without the chord, then any string that can play the
pitch; where no string can, any string of the tuning (the note is unplayable anyway).

Beam search (`beam` K > 1): a guitarist's string depends on the notes that follow, and the model scores them:
the tokens after a note (its techniques, the next onset, the next notes and their strings) are less likely after
a string that makes them awkward. So each window keeps K rows, ranked by the log-likelihood of all their tokens
so far (the teacher-forced ones too); at each String position every row's allowed strings are candidates, row 0
takes its own greedy choice (so the greedy path is always kept and the result never scores below it; K = 1 is
the greedy choice exactly) and rows 1..K-1 the best other candidates; the KV cache, the constraint's per-row
state and the onset's taken strings follow the rows as they are re-ranked. At the window's end the best row wins.
With K = 2 the one free row holds only the runner-up of each choice, so an alternative that pays off only after
the next token can be dropped for a likelier one first (the trap in tests/test_fingering.py needs K = 3).

Batched: each sequence is cut into windows of at most the model's block_size tokens, cut before a Bar where one
is in the window's second half (REMI writes the bar's TimeSig after it, so the constraint's clock is right from
the window's start; notes ringing into a window from the one before are not seen), else before a Position (an
onset's notes stay together), else before a Pitch. Windows of all sequences are rows of one batch, longest
first, K rows per window; every step feeds one token per row through the KV cache (rows that are done feed PAD,
which the causal mask keeps from earlier positions).

`finger(model, tokenizer, scores)` does this for GuitarScores and maps the strings back to the score's notes:
the ids come from encoding the part with `fretting.fret()`'s frets as placeholders (their String tokens are
never fed). The tokenizer quantises onsets, so notes are matched to token notes by quantised onset and pitch,
in order. A note with no token note left (its pitch outside the tokenizer's range, or a duplicate the tokenizer
dropped), or whose string another note of its onset took (two onsets quantised together), keeps fret()'s
fingering where that string is free, else the lowest free fret; `Fingered.fallback` counts them.

How often its choice agrees with human tabs: evaluation/fingering.py.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import symusic
import torch

from guitarformer.data.tab_tokens import MAX_STRINGS, decode_tab, is_tab_tokenizer, note_offset
from guitarformer.data.tokenization import encode
from guitarformer.errors import GuitarformerError
from guitarformer.fretting import fret
from guitarformer.generation.constraint import GuitarConstraint
from guitarformer.runtime import step_work, threads, threads_for
from guitarformer.generation.grammar import NO_PITCH
from guitarformer.music.guitar import MAX_FRET, TOKEN_PITCH_RANGE, fret_of, pitch_of
from guitarformer.music.score import UNPLAYABLE, GuitarScore

Guitar = tuple[tuple[int, ...], int]  # (tuning lowest string first, capo)
NOT_FRETTED = ("Tech_Dead", "Tech_HarmNatural")  # a note with one of these has no fretted pitch to compare
BEAM = 8  # rows kept per window by default: the best of 1, 4, 8 on held-out classtab (docs/FINGERING_MODEL.md)

_TRAIN_TAB = ("train a run on tab tokens: `guitarformer prepare DIR --tokenizer TabREMI` then `guitarformer train "
              "--data THAT_DATASET` (or `guitarformer train --set data.tokenizer=TabREMI`), without BPE")


def check_fingering_run(model, tokenizer) -> None:
    """One clear error unless the run can finger music: a decoder trained on TabREMI tokens without BPE."""
    kind = getattr(getattr(model, "config", None), "kind", "decoder")
    if kind != "decoder" or not hasattr(model, "new_cache"):
        raise GuitarformerError(f"fingering needs a decoder run; this one is a {kind}", _TRAIN_TAB)
    if not is_tab_tokenizer(tokenizer):
        raise GuitarformerError(f"fingering needs a run on tab tokens (TabREMI); this run uses "
                                f"{type(tokenizer).__name__}, whose notes carry no string", _TRAIN_TAB)
    if getattr(tokenizer, "is_trained", False):
        raise GuitarformerError("fingering needs one String token per note; this run's tokenizer merges tokens "
                                "with BPE", _TRAIN_TAB)


# ---------------------------------------------------------------- the model chooses the strings


class TabVocab:
    """Token tables the refingering loop reads: String ids, what starts an onset, what ends a note's tail."""

    def __init__(self, tokenizer) -> None:
        toks = [str(tokenizer[i]) for i in range(len(tokenizer))]
        kinds = [t.split("_")[0] for t in toks]
        self.string_ids = [tokenizer[f"String_{s}"] for s in range(1, MAX_STRINGS + 1)]
        self.string_of = {i: s for s, i in enumerate(self.string_ids, 1)}
        self.pitch_of = {i: int(t.split("_")[1]) for i, t in enumerate(toks) if kinds[i] == "Pitch"}
        self.bar = {i for i, k in enumerate(kinds) if k == "Bar"}
        self.onset = {i for i, k in enumerate(kinds) if k in ("Bar", "Position")}
        self.position = {i for i, k in enumerate(kinds) if k == "Position"}
        self.tail = {i for i, k in enumerate(kinds) if k in ("Bend", "Tech")}
        self.not_fretted = {tokenizer[t] for t in NOT_FRETTED}
        self.pad = tokenizer.pad_token_id
        self.offset = note_offset(tokenizer)  # a String comes this many tokens after its note's Pitch


def _windows(ids: Sequence[int], block: int, v: TabVocab) -> list[tuple[int, int]]:
    """[start, end) pieces of at most `block` tokens covering ids, each cut before a Bar in its second half,
    else before a Position there (an onset's notes stay together), else before a Pitch, else at the block;
    never right before a String (its Duration, whose logits choose it, stays in the same window)."""
    out, start, n = [], 0, len(ids)
    while start < n:
        end = min(start + block, n)
        if end < n:
            half = start + max(1, block // 2)
            cut = end
            for kind in (v.bar, v.position, v.pitch_of):  # the first kind found in the second half
                cut = next((j for j in range(end, half, -1) if ids[j] in kind), None)
                if cut is not None:
                    break
            cut = end if cut is None else cut
            while ids[cut] in v.string_of and cut > start + 1:
                cut -= 1
            end = cut
        out.append((start, end))
        start = end
    return out


class _Rows:
    """One (tuning, capo) group of rows of a batch: its constraint and which strings can play each pitch."""

    def __init__(self, tokenizer, guitar: Guitar, device: torch.device) -> None:
        tuning, capo = guitar
        self.constraint = GuitarConstraint(tokenizer, tuning, capo, device=device)
        fits = torch.zeros(NO_PITCH + 1, MAX_STRINGS, dtype=torch.bool)
        n = len(tuning)
        for k in range(min(n, MAX_STRINGS)):  # String_{k+1} is tab string k+1
            fits[pitch_of(k + 1, 0, tuning, capo): min(NO_PITCH, pitch_of(k + 1, MAX_FRET, tuning)) + 1, k] = True
        self.fits = fits.to(device)
        self.any_string = torch.zeros(MAX_STRINGS, dtype=torch.bool, device=device)
        self.any_string[:min(n, MAX_STRINGS)] = True
        # Host side, for the chord check: bit k set where String_{k+1} can play the pitch.
        self.fit_bits = [sum(1 << k for k, f in enumerate(row) if f) for row in fits.tolist()]
        self.all_bits = (1 << min(n, MAX_STRINGS)) - 1
        self.row_state = _row_state(self.constraint)


def _row_state(constraint: GuitarConstraint) -> list[tuple[object, str]]:
    """(object, attribute) of every per-row tensor of the constraint's state, found by starting it with one row
    and with two: the tensors whose first dimension follows the rows. Beam search reorders these."""
    def tensors(B: int) -> dict[tuple[int, str], tuple[object, int]]:
        constraint.start(torch.zeros(B, 0, dtype=torch.long, device=constraint.device))
        return {(id(o), k): (o, t.shape[0]) for o in vars(constraint).values() if hasattr(o, "__dict__")
                for k, t in vars(o).items() if isinstance(t, torch.Tensor) and t.dim() > 0}

    one, two = tensors(1), tensors(2)
    return [(o, k) for (i, k), (o, b) in one.items() if b == 1 and two.get((i, k), (None, 0))[1] == 2]


def refinger(model, tokenizer, sequences: Sequence[Sequence[int]], guitars: Sequence[Guitar],
             device: torch.device | str | None = None, batch_size: int = 64,
             context: int | None = None, beam: int = BEAM) -> list[list[int]]:
    """Each id sequence with every String token chosen by the model (see the module docstring); `guitars[k]`:
    the (tuning, capo) of sequence k. Everything but String tokens is returned as given. `context`: windows of
    at most this many tokens (default and most: the model's block_size); a step's cost grows with the window,
    since each new token attends to every earlier one. `beam`: rows kept per window (1: the greedy choice);
    `batch_size` counts rows, so a batch holds batch_size // beam windows."""
    return _refinger(model, tokenizer, sequences, guitars, device, batch_size, context, beam)[0]


def _refinger(model, tokenizer, sequences, guitars, device, batch_size, context,
              beam) -> tuple[list[list[int]], list[float]]:
    """`refinger`, and with beam > 1 each sequence's log-likelihood as the beam scored it (the sum over its windows
    that hold a String; 0.0 with beam 1, which keeps no score)."""
    check_fingering_run(model, tokenizer)
    if len(guitars) != len(sequences):
        raise ValueError("one (tuning, capo) per sequence")
    if beam < 1:
        raise ValueError(f"beam must be at least 1, not {beam}")
    per_batch = max(1, batch_size // beam)
    out = [list(map(int, s)) for s in sequences]
    device, v, rows = _string_windows(model, tokenizer, out, device, context)
    scores = [0.0] * len(out)
    groups: dict[Guitar, _Rows] = {}
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for b in range(0, len(rows), per_batch):
                batch = rows[b:b + per_batch]
                for g in {tuple(guitars[k]) for k, _, _ in batch}:
                    if g not in groups:
                        groups[g] = _Rows(tokenizer, (tuple(g[0]), int(g[1])), device)
                # Small steps on a CPU run fastest on one thread, unless the command asked for a count.
                with threads(threads_for(step_work(model, len(batch) * beam)) if device.type == "cpu"
                             else torch.get_num_threads()):
                    chosen = _refinger_batch(model, v, [out[k][a:c] for k, a, c in batch],
                                             [groups[tuple(guitars[k])] for k, _, _ in batch], device, beam)
                for (k, a, _), (row, ll) in zip(batch, chosen):
                    scores[k] += ll
                    for j, s in row:
                        out[k][a + j] = s
    finally:
        model.train(was_training)
    return out, scores


def _string_windows(model, tokenizer, sequences: Sequence[Sequence[int]], device, context: int | None
                    ) -> tuple[torch.device, TabVocab, list[tuple[int, int, int]]]:
    """(the device, the vocabulary's tables, the windows (sequence, start, end) that hold a String after their first
    token, longest first: little padding in a batch): how `refinger` and fret_model's `string_logprobs` cut what
    they read. `device` None: the model's; `context`: windows of at most this many tokens (and the block_size)."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    v = TabVocab(tokenizer)
    block = min(context or model.config.block_size, model.config.block_size)
    rows = [(k, a, b) for k, s in enumerate(sequences) for a, b in _windows(s, block, v)]
    rows = [r for r in rows if any(sequences[r[0]][j] in v.string_of for j in range(r[1] + 1, r[2]))]
    rows.sort(key=lambda r: r[1] - r[2])
    return device, v, rows


@dataclass
class _Plan:
    """The teacher-forced batch of one `_refinger_batch` call: row w * K + j is beam j of window w.

    `x` (B, T) the ids (PAD after a window's end), `pitch` (B, T) the pitch of the note whose String is at t,
    `scored` (B, T) the teacher-forced tokens whose log-prob adds to a row's score, `need[t]` the windows whose
    token t is a String to choose, `later[(w, t)]` the fit masks of the onset's notes after that one."""

    x: torch.Tensor
    pitch: torch.Tensor
    scored: torch.Tensor
    need: list[list[int]]
    later: dict[tuple[int, int], tuple[int, ...]]


def _plan(v: TabVocab, windows: list[list[int]], win_groups: list[_Rows], K: int) -> _Plan:
    T = max(len(r) for r in windows)
    B = len(windows) * K
    x = torch.full((B, T), v.pad, dtype=torch.long)
    pitch = torch.full((B, T), NO_PITCH, dtype=torch.long)
    scored = torch.zeros(B, T, dtype=torch.bool)
    need: list[list[int]] = [[] for _ in range(T)]
    later: dict[tuple[int, int], tuple[int, ...]] = {}
    for w, row in enumerate(windows):
        rs = slice(w * K, (w + 1) * K)
        x[rs, :len(row)] = torch.tensor(row)
        scored[rs, 1:len(row)] = True
        onset: list[tuple[int, int]] = []  # (position, pitch) of the String tokens since the last Bar/Position
        for j in range(1, len(row) + 1):
            if j == len(row) or row[j] in v.onset:
                for k, (jj, _) in enumerate(onset):
                    if k + 1 < len(onset):
                        later[(w, jj)] = tuple(win_groups[w].fit_bits[p] for _, p in onset[k + 1:])
                onset = []
            elif row[j] in v.string_of:
                need[j].append(w)
                p = v.pitch_of.get(row[j - v.offset], NO_PITCH) if j >= v.offset else NO_PITCH
                pitch[rs, j] = p
                scored[rs, j] = False
                onset.append((j, p))
    return _Plan(x, pitch, scored, need, later)


def _start_groups(win_groups: list[_Rows], K: int, x: torch.Tensor, device: torch.device
                  ) -> tuple[dict[int, tuple[_Rows, torch.Tensor]], torch.Tensor]:
    """Each (tuning, capo) group with its rows, its constraint started on them; and each row's index among its
    group's rows (which beam search's reordering needs)."""
    member: dict[int, tuple[_Rows, list[int]]] = {}
    for r in range(x.shape[0]):
        g = win_groups[r // K]
        member.setdefault(id(g), (g, []))[1].append(r)
    groups: dict[int, tuple[_Rows, torch.Tensor]] = {}
    local = torch.zeros(x.shape[0], dtype=torch.long)
    for key, (g, rs) in member.items():
        groups[key] = (g, torch.tensor(rs, device=device))
        local[rs] = torch.arange(len(rs))
        g.constraint.start(x[groups[key][1], :0])
    return groups, local.to(device)


def _allowed(ws: list[int], K: int, t: int, tok: torch.Tensor, plan: _Plan, taken: torch.Tensor,
             groups: dict[int, tuple[_Rows, torch.Tensor]], win_groups: list[_Rows],
             string_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, ok): the rows of windows `ws` choosing a String at t, and the strings each may take: the
    constraint's, free at the onset, leaving room for the onset's later notes; else the fallbacks, in order."""
    B, device = tok.shape[0], tok.device
    allowed = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)
    fits = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)
    anys = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)
    for key in {id(win_groups[w]) for w in ws}:
        g, rs = groups[key]
        allowed[rs] = g.constraint.mask(tok[rs])[:, string_ids]
        fits[rs] = g.fits[plan.pitch[rs, t]]
        anys[rs] = g.any_string
    rs = torch.tensor([w * K + j for w in ws for j in range(K)], device=device)
    free = ~taken[rs]
    chord = _leaves_room(ws, K, t, plan.later, free, win_groups)  # the rest of the onset still fits
    ok = allowed[rs] & free & chord
    for wider in (fits[rs] & free & chord, allowed[rs] & free, fits[rs] & free, fits[rs], anys[rs]):
        ok = torch.where(ok.any(1, keepdim=True), ok, wider)
    return rs, ok


def _refinger_batch(model, v: TabVocab, windows: list[list[int]], win_groups: list[_Rows], device: torch.device,
                    beam: int = 1) -> list[tuple[list[tuple[int, int]], float]]:
    """Teacher-force the windows one token per step, `beam` rows per window (module docstring: beam search);
    returns, per window, the (position, chosen String id) pairs of its best row and that row's score."""
    K, W = beam, len(windows)
    plan = _plan(v, windows, win_groups, K)
    B, T = plan.x.shape
    plan = _Plan(plan.x.to(device), plan.pitch.to(device), plan.scored.to(device), plan.need, plan.later)
    x = plan.x
    string_ids = torch.tensor(v.string_ids, device=device)
    onset_ids = torch.tensor(sorted(v.onset), device=device)
    groups, local = _start_groups(win_groups, K, x, device)
    taken = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)  # strings struck at the current onset
    # score: log-likelihood of each row's tokens so far; one row per window starts (the others, -inf, are filled
    # by the first String's alternatives), and row 0 of each window always follows the greedy choice.
    score = torch.zeros(W, K, dtype=torch.float64, device=device)
    score[:, 1:] = float("-inf")
    score = score.view(B)
    cache = model.new_cache(B, T, device=device)
    for t in range(T):
        tok = x[:, t]
        logits = model(tok.unsqueeze(1), cache=cache)[0][:, -1]  # (B, V)
        for g, rs in groups.values():
            g.constraint.update(tok[rs])
        taken &= ~torch.isin(tok, onset_ids).unsqueeze(1)
        struck = torch.isin(tok, string_ids)
        s_idx = (tok.unsqueeze(1) == string_ids).float().argmax(1)  # (B,) which string, where struck
        taken[struck, s_idx[struck]] = True
        if t + 1 >= T:
            continue
        logp = None
        if K > 1:  # float64: adding a long sequence's score keeps every float32 logit difference (ties stay ties)
            logp = logits.double()
            logp = logp - torch.logsumexp(logp, 1, keepdim=True)
            nxt = logp.gather(1, x[:, t + 1:t + 2]).squeeze(1)
            score = score + torch.where(plan.scored[:, t + 1], nxt, 0.0)
        ws = plan.need[t + 1]
        if not ws:
            continue
        rs, ok = _allowed(ws, K, t + 1, tok, plan, taken, groups, win_groups, string_ids)
        greedy = logits[rs][:, string_ids].masked_fill(~ok, float("-inf")).argmax(1)  # (len(rs),)
        if K == 1:
            x[rs, t + 1] = string_ids[greedy]
            continue
        src, pick, new_score = _beam_step(ws, K, B, score[rs], logp[rs][:, string_ids], ok, greedy)
        _reorder(src, cache, groups.values(), local)
        x, taken, score = x[src], taken[src], score[src]
        x[rs, t + 1] = string_ids[pick]
        score[rs] = new_score
    best = score.view(W, K).argmax(1).tolist() if K > 1 else [0] * W  # the first of equals: the greedy row
    chosen, final = x.cpu().tolist(), score.view(W, K).cpu().tolist()
    return [([(j, chosen[w * K + best[w]][j]) for j in range(1, len(row)) if row[j] in v.string_of],
             final[w][best[w]]) for w, row in enumerate(windows)]


def _beam_step(ws: list[int], K: int, B: int, score: torch.Tensor, logp: torch.Tensor, ok: torch.Tensor,
               greedy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One String choice of beam search over the rows of windows `ws` (K each; `score`, `logp` (rows, strings),
    `ok` and `greedy` theirs): row 0 of each window takes its own greedy choice, rows 1..K-1 the best other
    (row, string) candidates. Returns the source row of every row of the batch (B,), each chosen row's string
    index and its new score."""
    cand = (score.unsqueeze(1) + logp).masked_fill(~ok, float("-inf"))
    cand = cand.view(len(ws), K * MAX_STRINGS)  # beam j's string s at j * MAX_STRINGS + s
    first = greedy.view(len(ws), K)[:, 0]
    keep = cand.gather(1, first.unsqueeze(1))
    rest = cand.scatter(1, first.unsqueeze(1), float("-inf")).sort(dim=1, descending=True, stable=True)
    pick = torch.cat([first.unsqueeze(1), rest.indices[:, :K - 1]], 1)  # (len(ws), K)
    new_score = torch.cat([keep, rest.values[:, :K - 1]], 1)
    device = score.device
    parent = torch.tensor([w * K for w in ws], device=device).repeat_interleave(K) + pick.view(-1) // MAX_STRINGS
    src = torch.arange(B, device=device)
    src[torch.tensor([w * K + j for w in ws for j in range(K)], device=device)] = parent
    return src, pick.view(-1) % MAX_STRINGS, new_score.view(-1)


def _reorder(src: torch.Tensor, cache, groups, local: torch.Tensor) -> None:
    """Row r of every per-row state becomes what row src[r] was: the KV cache and each group's constraint."""
    moved = (src != torch.arange(len(src), device=src.device)).nonzero().squeeze(1)
    if not len(moved):
        return
    dst, frm, n = moved, src[moved], cache.length
    for kv in (cache.k, cache.v):
        for buf in kv:
            if buf is not None:
                buf[dst, :, :n] = buf[frm, :, :n]
    if cache.last is not None:  # a decoder with model.prev_token: each row's last token moves with it
        cache.last[dst] = cache.last[frm]
    if cache.match is not None:  # model.copy: each row's tokens and n-gram hashes
        cache.match.reorder(dst, frm)
    for g, rs in groups:
        lsrc = local[src[rs]]  # a row's source is in its own window, so in its group
        if bool((lsrc != torch.arange(len(rs), device=rs.device)).any()):
            for obj, name in g.row_state:
                setattr(obj, name, getattr(obj, name)[lsrc])


def _leaves_room(ws: list[int], K: int, t: int, later: dict, free: torch.Tensor,
                 win_groups: list[_Rows]) -> torch.Tensor:
    """(len(ws) * K, MAX_STRINGS) bool, rows in the order of windows `ws`, K rows each: choosing that string for
    the row's note at t still leaves distinct free strings for the notes after it at the same onset (all True for
    a note that is last at its onset). Without this a greedy choice can take the one string a later, lower note
    needs."""
    out = torch.ones(len(ws) * K, MAX_STRINGS, dtype=torch.bool)
    todo = [(i * K + j, w, later[(w, t)]) for i, w in enumerate(ws) if (w, t) in later for j in range(K)]
    if todo:
        free_host = free.cpu().tolist()
        for i, w, masks in todo:
            bits = sum(1 << k for k, f in enumerate(free_host[i]) if f) & win_groups[w].all_bits
            for k in range(MAX_STRINGS):
                if bits >> k & 1:
                    out[i, k] = _matchable(masks, bits & ~(1 << k))
    return out.to(free.device)


@functools.lru_cache(maxsize=1 << 16)
def _matchable(masks: tuple[int, ...], free: int) -> bool:
    """Can each note (a bit mask of the strings that can play it) get its own string among `free` (bits)?"""
    if not masks:
        return True
    options = masks[0] & free
    while options:
        bit = options & -options
        if _matchable(masks[1:], free & ~bit):
            return True
        options &= ~bit
    return False


def log_likelihood(model, tokenizer, sequences: Sequence[Sequence[int]], device: torch.device | str | None = None,
                   context: int | None = None) -> list[float]:
    """Each sequence's log-likelihood under the model as `refinger` reads it: the sum, over its windows (the same
    cuts), of the log-probability of every token of the window after the first, given the window's earlier
    tokens. What beam search maximises for each window; one plain forward pass per window, no cache."""
    check_fingering_run(model, tokenizer)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    v = TabVocab(tokenizer)
    block = min(context or model.config.block_size, model.config.block_size)
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.inference_mode():
            for seq in sequences:
                total = 0.0
                for a, b in _windows(seq, block, v):
                    if b - a < 2:
                        continue
                    ids = torch.tensor([list(seq[a:b])], device=device)
                    logp = model(ids[:, :-1])[0][0].double().log_softmax(-1)  # (b - a - 1, V)
                    total += float(logp.gather(1, ids[0, 1:].unsqueeze(1)).sum())
                out.append(total)
    finally:
        model.train(was_training)
    return out


# ---------------------------------------------------------------- back to the score's notes


@dataclass
class Fingered:
    """The model's fingering of one part: one (string, fret) per note of `gs.track.notes` (UNPLAYABLE where no
    string of the tuning sounds the pitch); `fallback`: notes that kept fret()'s fingering (module docstring)."""

    frets: list[tuple[int, int]]
    fallback: int = 0
    strings_chosen: int = 0


def finger(model, tokenizer, scores: Sequence[GuitarScore], device: torch.device | str | None = None,
           batch_size: int = 64, beam: int = BEAM) -> list[Fingered]:
    """The model's fingering of every note of each part (module docstring). The model runs in eval mode under
    inference mode and is given back in the mode it came in."""
    check_fingering_run(model, tokenizer)
    placeholders = [fret(list(gs.track.notes), gs.tuning, gs.capo, program=gs.track.program) for gs in scores]
    seqs = [encode(tokenizer, replace(gs, frets=p)) for gs, p in zip(scores, placeholders)]
    ids = refinger(model, tokenizer, seqs, [(tuple(gs.tuning), gs.capo) for gs in scores], device, batch_size,
                   beam=beam)
    return [_to_notes(tokenizer, gs, p, i) for gs, p, i in zip(scores, placeholders, ids)]


def _onset_map(tokenizer, gs: GuitarScore) -> tuple[dict[int, int], int]:
    """Each onset tick of the part -> the tick the tokenizer quantises it to, and that time's ticks per quarter.
    One probe note per onset, pitches cycling through the token range so no two probes merge."""
    onsets = sorted({n.time for n in gs.track.notes})
    probe = symusic.Score(gs.score.ticks_per_quarter)
    probe.tempos = gs.score.tempos.copy()
    probe.time_signatures = gs.score.time_signatures.copy()
    tr = symusic.Track(program=gs.track.program)
    lo, hi = TOKEN_PITCH_RANGE
    pitch_of = {}
    for k, t in enumerate(onsets):
        pitch_of[t] = lo + k % (hi - lo)
        tr.notes.append(symusic.Note(t, gs.score.ticks_per_quarter, pitch_of[t], 80))
    probe.tracks.append(tr)
    pre = tokenizer.preprocess_score(probe)
    got: dict[int, list[int]] = {}
    for n in (pre.tracks[0].notes if pre.tracks else []):
        got.setdefault(n.pitch, []).append(n.time)
    out = {}
    for t in onsets:  # probes of one pitch are 88 onsets apart: their order is kept
        times = got.get(pitch_of[t])
        if times:
            out[t] = times.pop(0)
    return out, pre.ticks_per_quarter


def token_note_of(tokenizer, gs: GuitarScore, ids: Sequence[int]) -> tuple[list[int | None], list[int]]:
    """For each note of `gs.track.notes`, the index of its note in `ids` (token order; None: the tokenizer kept no
    note for it), matched by quantised onset and pitch in order; and the strings the ids write, per token note."""
    base = [i for i in ids if tokenizer[int(i)] not in ("BOS_None", "EOS_None")]
    dec, strings, _ = decode_tab(tokenizer, base)
    dnotes = list(dec.tracks[0].notes) if dec.tracks else []
    qmap, qtpq = _onset_map(tokenizer, gs)
    per_tick = qtpq / dec.ticks_per_quarter
    by_key: dict[tuple[int, int], list[int]] = {}
    for k, dn in enumerate(dnotes):
        by_key.setdefault((round(dn.time * per_tick), dn.pitch), []).append(k)
    out: list[int | None] = []
    for note in gs.track.notes:
        left = by_key.get((qmap.get(note.time, -1), note.pitch))
        out.append(left.pop(0) if left else None)
    return out, list(strings)


def _to_notes(tokenizer, gs: GuitarScore, placeholder: list[tuple[int, int]], ids: list[int]) -> Fingered:
    notes = list(gs.track.notes)
    n = len(gs.tuning)
    of, strings = token_note_of(tokenizer, gs, ids)

    def played(s: int, pitch: int) -> tuple[int, int]:
        f = fret_of(pitch, s, gs.tuning, gs.capo)
        return (s, f) if 0 <= f <= MAX_FRET else UNPLAYABLE

    out: list[tuple[int, int]] = [UNPLAYABLE] * len(notes)
    fallback = 0
    used: dict[int, set[int]] = {}  # onset tick -> strings taken there
    for i, note in enumerate(notes):
        taken = used.setdefault(note.time, set())
        if of[i] is not None:
            got = played(strings[of[i]], note.pitch)
            if got[0] not in taken or got == UNPLAYABLE:
                out[i] = got
                taken.add(got[0])
                continue
        fallback += 1
        if placeholder[i] != UNPLAYABLE and placeholder[i][0] not in taken:
            out[i] = placeholder[i]
        else:  # the lowest free fret
            free = [played(s, note.pitch) for s in range(1, n + 1) if s not in taken]
            free = [f for f in free if f != UNPLAYABLE]
            out[i] = min(free, key=lambda sf: sf[1]) if free else UNPLAYABLE
        taken.add(out[i][0])
    return Fingered(out, fallback, len(strings))
