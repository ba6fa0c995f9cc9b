"""The model fingers other music: a tab-token model chooses the string of every note of a file.

A TabREMI note is ``Pitch [Velocity] Duration [String] [Bend] [Tech ...]``: the string comes after everything
else about the note, so a decoder trained on tab tokens has, at each note's Duration, a distribution over the
strings that could play it. Tab layout 2 writes a String on every note, and p(String_s) is that distribution.
Layout 3 (vocab/tab_tokens.py) writes one only where the note leaves its lowest-fret string (`lowest_fret_string`
in the part's tuning and capo): there p(String_s) is the model's belief in string s for every other string, and
its belief in the lowest-fret string is the mass of everything that is not a String token (the note ends at its
Duration), equivalently 1 - sum_s p(String_s).

`refinger` reads a part's token ids with teacher forcing (every token as the file has it) except strings, which the
model chooses among those the guitar allows: with `beam=1` at each note the likeliest one, by default (`BEAM`) the
strings of the likeliest whole window found by beam search (below). A choice is what the model reads next: in
layout 2 the chosen String token in the String's place (never the String in the ids); in layout 3 a String token
after the Duration for a string off the lowest fret, and for the lowest-fret string nothing: the row reads the
next teacher-forced token at once. The ids' own String tokens are placeholders (every note's string is chosen),
so layout 3 drops them all before reading. The fret follows from pitch, string, tuning and capo.

What the guitar allows is `GuitarConstraint`'s mask at that step (strings that can play the pitch in the part's
tuning and capo, and whatever else the constraint knows about strings still sounding), less the strings already
taken at the same onset, and those that would leave the onset's later notes (known ahead: teacher forcing) no
distinct strings (checked here, so a greedy choice never doubles a string in a chord, an implied lowest-fret
string included). In layout 3 the constraint says the lowest-fret string is free by letting the note end without
a String (its mask never allows String_<lowest> there; an older constraint that still does is read the same way:
the lowest string is allowed where String_<lowest> or a token that ends the note is). Where that leaves nothing,
the same without the constraint's mask, then without the chord, then any string that can play the pitch; where no
string can, any string of the tuning (the note is unplayable anyway).

Beam search (`beam` K > 1): a guitarist's string depends on the notes that follow, and the model scores them:
the tokens after a note (its techniques, the next onset, the next notes and their strings) are less likely after
a string that makes them awkward. So each window keeps K rows, ranked by the log-likelihood of all their tokens
so far (the teacher-forced ones too); at each choice every row's allowed strings are candidates, row 0 takes its
own greedy choice (so the greedy path is always kept and the result never scores below it; K = 1 is the greedy
choice exactly) and rows 1..K-1 the best other candidates; the KV cache, the constraint's per-row state and the
onset's taken strings follow the rows as they are re-ranked. At the window's end the best row wins.
With K = 2 the one free row holds only the runner-up of each choice, so an alternative that pays off only after
the next token can be dropped for a likelier one first (the trap in tests/generation/test_fingering.py needs K = 3).

Layout 3's rows drift apart: a row that writes a String has one token more to read than one that does not, so
each row keeps its own pointer into the window's teacher-forced tokens (moved with the row when beam search
re-ranks it). Every row still reads one token a step, so the KV cache's length is the number of tokens each row
has read and each row's positions are those of its own sequence, as in training. Rows at different places in the
part are not ranked by their log-likelihoods as they stand: a String the model expects is a cheap token, so a
row that wrote more of them would look better merely for having read less of the part. The ranking is relative
to a reference instead: a window's tokens and string choices are slots (a note's choice is a slot whether or not
a String is written), the first row to reach a slot leaves its cost there (the lowest string's cost split into
the choice, log of the non-String mass, and the token read after it given that), and a row ranks by its
log-likelihood less the reference costs of the slots it has covered. Rows at the same place rank exactly by
log-likelihood, so layout 2, where every row writes every String, is the plain beam search above (run as it
always was). At the window's end every row has read all of it, and the best by exact log-likelihood wins (a note
that ends the window on its lowest-fret string costs the non-String mass there, as `log_likelihood` counts it).
On a 500-step layout-3 run (16 held-out classtab parts, windows of 256), beam 8 ranked this way gained 3.3 times
the log-likelihood over the greedy choice that ranking rows as they stand did. Ending a note shows its cost at
once (the token read after it), a String one token later: an alternative String that pays off only in that token
needs more rows than in layout 2 to survive rows that ended the note (tests/generation/test_fingering.py: K = 4 for two
such notes in a row).

Batched: each sequence is cut into windows of at most the model's block_size tokens, cut before a Bar where one
is in the window's second half (REMI writes the bar's TimeSig after it, so the constraint's clock is right from
the window's start; notes ringing into a window from the one before are not seen), else before a Position (an
onset's notes stay together), else before a Pitch. Layout 3 cuts the ids without their String tokens, each note
counting two tokens (itself and room for the String it may get), so no row's window outgrows block_size. Windows
of all sequences are rows of one batch, longest first, K rows per window; every step feeds one token per row
through the KV cache (rows that are done feed PAD, which the causal mask keeps from earlier positions).

`finger(model, tokenizer, scores)` does this for GuitarScores and maps the strings back to the score's notes:
the ids come from encoding the part with `fingering.fret()`'s frets as placeholders (their String tokens are
never fed). The tokenizer quantises onsets, so notes are matched to token notes by quantised onset and pitch,
in order, and each token note's string is read from the final ids decoded in the part's tuning and capo (layout
3's unwritten strings resolved to the lowest fret). A note with no token note left (its pitch outside the
tokenizer's range, or a duplicate the tokenizer dropped), or whose string another note of its onset took (two
onsets quantised together), keeps fret()'s fingering where that string is free, else the lowest free fret;
`Fingered.fallback` counts them.

How often its choice agrees with human tabs: fingering/agreement.py. Here: the public API and layout 2's beam
search; layout 3's is tab_implied.py, and the token tables, windows and row machinery both share
tab_rows.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import symusic
import torch

from guitarformer.vocab.tab_tokens import MAX_STRINGS, decode_tab, is_tab_tokenizer
from guitarformer.vocab.tokenization import encode
from guitarformer.errors import GuitarformerError
from guitarformer.fingering.viterbi import fret
from guitarformer.runtime import step_work, threads, threads_for
from guitarformer.fingering.tab_implied import refinger_batch3
from guitarformer.fingering.tab_rows import (
    ChoiceTables,
    Guitar,
    TabVocab,
    RowGroup,
    allowed_strings,
    window_size,
    window_cuts,
    reorder_rows,
    SlotCache,
    start_groups,
    string_windows,
    strip_strings,
    window_spans,
)
from guitarformer.generation.constraint.grammar import NO_PITCH
from guitarformer.music.guitar import MAX_FRET, TOKEN_PITCH_RANGE, fret_of
from guitarformer.music.score import UNPLAYABLE, GuitarScore

BEAM = 8  # rows kept per window by default: the best of 1, 4, 8 on held-out classtab (docs/results/FINGERING_MODEL.md)

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
        raise GuitarformerError("fingering chooses each note's string right after its Duration, a token of its "
                                "own; this run's tokenizer merges tokens with BPE", _TRAIN_TAB)


# ---------------------------------------------------------------- the model chooses the strings


def refinger(model, tokenizer, sequences: Sequence[Sequence[int]], guitars: Sequence[Guitar],
             device: torch.device | str | None = None, batch_size: int = 64,
             context: int | None = None, beam: int = BEAM) -> list[list[int]]:
    """Each id sequence with every note's string chosen by the model (see the module docstring); `guitars[k]`:
    the (tuning, capo) of sequence k. Everything but String tokens is returned as given; in tab layout 2 each String
    token is replaced by the model's, in layout 3 the ids' Strings are dropped and one written after each note the
    model puts off its lowest-fret string (so the length changes). `context`: windows of at most this many tokens
    (default and most: the model's block_size); a step's cost grows with the window, since each new token attends
    to every earlier one. `beam`: rows kept per window (1: the greedy choice); `batch_size` counts rows, so a
    batch holds at most batch_size // beam windows (on a CPU in layout 2, one: `_windows_a_batch`)."""
    return _refinger(model, tokenizer, sequences, guitars, device, batch_size, context, beam)[0]


def _windows_a_batch(device: torch.device, v: TabVocab, batch_size: int, beam: int) -> int:
    """How many windows one `_refinger_batch` call reads: as many as `batch_size` rows hold (`beam` rows each),
    except one on a CPU in layout 2. There a batch reads the tokens up to the next choice of any of its windows in
    one forward, so one window a batch reads the longest chunks, and a CPU gains more from that than from wide
    batches: `tab --run` 1.07-1.4x faster than with 8 windows, the same tabs (docs/results/FINGERING_MODEL.md). A GPU,
    and layout 3 (one token a forward), keep the wide batches."""
    if device.type == "cpu" and not v.implied:
        return 1
    return max(1, batch_size // beam)


def _refinger(model, tokenizer, sequences, guitars, device, batch_size, context,
              beam) -> tuple[list[list[int]], list[float]]:
    """`refinger`, and with beam > 1 each sequence's log-likelihood as the beam scored it (the sum over its windows
    that choose a string; 0.0 with beam 1, which keeps no score)."""
    check_fingering_run(model, tokenizer)
    if len(guitars) != len(sequences):
        raise ValueError("one (tuning, capo) per sequence")
    if beam < 1:
        raise ValueError(f"beam must be at least 1, not {beam}")
    out = [list(map(int, s)) for s in sequences]
    v = TabVocab(tokenizer)
    if v.implied:  # every note's string is chosen: the placeholders' String tokens go
        out = [strip_strings(v, s) for s in out]
    device, v, rows = string_windows(model, tokenizer, out, device, context)
    per_batch = _windows_a_batch(device, v, batch_size, beam)
    chosen_windows: dict[tuple[int, int], list[int]] = {}  # layout 3: (sequence, start) -> the window as chosen
    scores = [0.0] * len(out)
    groups: dict[Guitar, RowGroup] = {}
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for b in range(0, len(rows), per_batch):
                batch = rows[b:b + per_batch]
                for g in {tuple(guitars[k]) for k, _, _ in batch}:
                    if g not in groups:
                        groups[g] = RowGroup(tokenizer, (tuple(g[0]), int(g[1])), device)
                # Small steps on a CPU run fastest on one thread, unless the command asked for a count.
                with threads(threads_for(step_work(model, len(batch) * beam)) if device.type == "cpu"
                             else torch.get_num_threads()):
                    run = refinger_batch3 if v.implied else _refinger_batch
                    chosen = run(model, v, [out[k][a:c] for k, a, c in batch],
                                 [groups[tuple(guitars[k])] for k, _, _ in batch], device, beam)
                for (k, a, _), (row, ll) in zip(batch, chosen):
                    scores[k] += ll
                    if v.implied:
                        chosen_windows[(k, a)] = row
                        continue
                    for j, s in row:
                        out[k][a + j] = s
    finally:
        model.train(was_training)
    if v.implied:  # each window as its best row read it (Strings in), the windows without a note as they were
        block = window_size(model, context)
        out = [[i for a, b in window_spans(s, block, v, v.note_ends(s)) for i in chosen_windows.get((k, a), s[a:b])]
               for k, s in enumerate(out)]
    return out, scores


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


def _plan(v: TabVocab, windows: list[list[int]], win_groups: list[RowGroup], K: int) -> _Plan:
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


def _refinger_batch(model, v: TabVocab, windows: list[list[int]], win_groups: list[RowGroup], device: torch.device,
                    beam: int = 1) -> list[tuple[list[tuple[int, int]], float]]:
    """Teacher-force the windows, `beam` rows per window (module docstring: beam search), the tokens between two
    choices in one forward; returns, per window, the (position, chosen String id) pairs of its best row and that
    row's score."""
    K, W = beam, len(windows)
    plan = _plan(v, windows, win_groups, K)
    B, T = plan.x.shape
    plan = _Plan(plan.x.to(device), plan.pitch.to(device), plan.scored.to(device), plan.need, plan.later)
    x = plan.x
    string_ids = torch.tensor(v.string_ids, device=device)
    onset_ids = torch.tensor(sorted(v.onset), device=device)
    groups, local = start_groups(win_groups, K, x, device)
    tables = ChoiceTables(v, win_groups, groups, plan.later, string_ids)
    taken = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)  # strings struck at the current onset
    # score: log-likelihood of each row's tokens so far; one row per window starts (the others, -inf, are filled
    # by the first String's alternatives), and row 0 of each window always follows the greedy choice.
    score = torch.zeros(W, K, dtype=torch.float64, device=device)
    score[:, 1:] = float("-inf")
    score = score.view(B)
    cache = SlotCache(model, B, T, device)
    # The tokens up to the next choice of any window are known: the model reads them in one forward (a chunk: one
    # read of the KV cache for them all, where a token a forward read it once a token; `tab --run` 1.1-1.5x faster),
    # and the steps below walk its logits one position at a time (what a token a forward gives, but for rounding).
    stops = [T] * (T + 1)  # stops[t]: the end of the chunk from t, the next position a window chooses at (or T)
    for t in range(T - 1, -1, -1):
        stops[t] = t + 1 if t + 1 < T and plan.need[t + 1] else stops[t + 1]
    start = end = 0
    for t in range(T):
        if t == end:
            chunk, start, end = cache.read(x[:, t:stops[t]]), t, stops[t]  # (B, end - t, V)
        tok = x[:, t]
        logits = chunk[:, t - start]  # (B, V)
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
        rs = torch.tensor([w * K + j for w in ws for j in range(K)], device=device)
        ok = allowed_strings(tables, rs, [(w, t + 1) for w in ws for _ in range(K)], tok, plan.pitch[rs, t + 1],
                             taken)
        greedy = logits[rs][:, string_ids].masked_fill(~ok, float("-inf")).argmax(1)  # (len(rs),)
        if K == 1:
            x[rs, t + 1] = string_ids[greedy]
            continue
        src, pick, new_score = _beam_step(ws, K, B, score[rs], logp[rs][:, string_ids], ok, greedy)
        reorder_rows(src, cache, groups.values(), local)
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


def log_likelihood(model, tokenizer, sequences: Sequence[Sequence[int]], device: torch.device | str | None = None,
                   context: int | None = None) -> list[float]:
    """Each sequence's log-likelihood under the model as `refinger` reads it: the sum, over its windows (the same
    cuts, `window_cuts`), of the log-probability of every token of the window after the first, given the window's
    earlier tokens; in layout 3, where a window ends on a note's Duration (its string the lowest-fret one), also
    the log-probability that no String follows it. What beam search maximises for each window; one plain forward
    pass per window, no cache."""
    check_fingering_run(model, tokenizer)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    v = TabVocab(tokenizer)
    block = window_size(model, context)
    not_string = torch.tensor(v.not_string, device=device)
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.inference_mode():
            for seq in sequences:
                total = 0.0
                ends = v.note_ends(seq) if v.implied else None
                for a, b in window_cuts(seq, block, v):
                    open_note = ends is not None and ends[b - 1]  # the window ends on a note: no String after it
                    if b - a < 2 and not open_note:
                        continue
                    ids = torch.tensor([list(seq[a:b])], device=device)
                    logp = model(ids if open_note else ids[:, :-1])[0][0].double().log_softmax(-1)
                    total += float(logp[:b - a - 1].gather(1, ids[0, 1:].unsqueeze(1)).sum())
                    if open_note:
                        total += float(logp[-1].index_select(0, not_string).logsumexp(0))
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
    note for it), matched by quantised onset and pitch in order; and the string of each token note, in the part's
    tuning and capo (layout 3: the lowest-fret string where the ids write none)."""
    base = [i for i in ids if tokenizer[int(i)] not in ("BOS_None", "EOS_None")]
    dec, strings, _ = decode_tab(tokenizer, base, (tuple(gs.tuning), gs.capo))  # layout 3: unwritten strings resolved
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
