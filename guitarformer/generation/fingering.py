"""The model fingers other music: a tab-token model chooses the string of every note of a file.

A TabREMI note is ``Pitch [Velocity] Duration [String] [Bend] [Tech ...]``: the string comes after everything
else about the note, so a decoder trained on tab tokens has, at each note's Duration, a distribution over the
strings that could play it. Tab layout 2 writes a String on every note, and p(String_s) is that distribution.
Layout 3 (data/tab_tokens.py) writes one only where the note leaves its lowest-fret string (`lowest_fret_string`
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
the next token can be dropped for a likelier one first (the trap in tests/test_fingering.py needs K = 3).

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
needs more rows than in layout 2 to survive rows that ended the note (tests/test_fingering.py: K = 4 for two
such notes in a row).

Batched: each sequence is cut into windows of at most the model's block_size tokens, cut before a Bar where one
is in the window's second half (REMI writes the bar's TimeSig after it, so the constraint's clock is right from
the window's start; notes ringing into a window from the one before are not seen), else before a Position (an
onset's notes stay together), else before a Pitch. Layout 3 cuts the ids without their String tokens, each note
counting two tokens (itself and room for the String it may get), so no row's window outgrows block_size. Windows
of all sequences are rows of one batch, longest first, K rows per window; every step feeds one token per row
through the KV cache (rows that are done feed PAD, which the causal mask keeps from earlier positions).

`finger(model, tokenizer, scores)` does this for GuitarScores and maps the strings back to the score's notes:
the ids come from encoding the part with `fretting.fret()`'s frets as placeholders (their String tokens are
never fed). The tokenizer quantises onsets, so notes are matched to token notes by quantised onset and pitch,
in order, and each token note's string is read from the final ids decoded in the part's tuning and capo (layout
3's unwritten strings resolved to the lowest fret). A note with no token note left (its pitch outside the
tokenizer's range, or a duplicate the tokenizer dropped), or whose string another note of its onset took (two
onsets quantised together), keeps fret()'s fingering where that string is free, else the lowest free fret;
`Fingered.fallback` counts them.

How often its choice agrees with human tabs: evaluation/fingering.py.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import symusic
import torch

from guitarformer.data.tab_tokens import (
    MAX_STRINGS,
    decode_tab,
    implied_strings,
    is_tab_tokenizer,
    lowest_fret_string,
    note_offset,
)
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
        raise GuitarformerError("fingering chooses each note's string right after its Duration, a token of its "
                                "own; this run's tokenizer merges tokens with BPE", _TRAIN_TAB)


# ---------------------------------------------------------------- the model chooses the strings


class TabVocab:
    """Token tables the refingering loop reads: String ids, what starts an onset, what ends a note's tail, where a
    note's Duration is; `implied`: tab layout 3 (a note on its lowest-fret string writes no String)."""

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
        self.implied = implied_strings(tokenizer)
        self.duration = {i for i, k in enumerate(kinds) if k == "Duration"}
        self.velocity = {i for i, k in enumerate(kinds) if k == "Velocity"}
        self.velocities = bool(tokenizer.config.use_velocities)
        # Layout 3: p(lowest-fret string) is the mass of `not_string` (every token but a String) after a note's
        # Duration, and the constraint frees that string by allowing one of `ends_note` (what the grammar lets
        # follow a Duration, a String aside: the note's tail or the next note or onset; not EOS, which a constraint
        # at a dead end allows whatever the strings).
        self.not_string = [i for i, k in enumerate(kinds) if k != "String"]
        follow = {t.split("_")[0] for t in getattr(tokenizer, "tokens_types_graph", {}).get("Duration", ())}
        self.ends_note = [i for i, k in enumerate(kinds) if k in follow - {"String", "EOS"}]

    def note_ends(self, ids: Sequence[int]) -> list[bool]:
        """Per token of `ids`: it is the Duration of a whole note (``Pitch [Velocity] Duration``, as
        `tab_tokens.closes_note` reads one): where layout 3's string is chosen."""
        back = self.offset - 1  # the Pitch is this many tokens before its Duration
        return [i in self.duration and j >= back and ids[j - back] in self.pitch_of
                and (not self.velocities or ids[j - 1] in self.velocity) for j, i in enumerate(ids)]

    def note_pitch(self, ids: Sequence[int], j: int) -> int:
        """The pitch of the note whose Duration is ids[j]."""
        return self.pitch_of[ids[j - self.offset + 1]]


def _windows(ids: Sequence[int], block: int, v: TabVocab,
             notes: Sequence[bool] | None = None) -> list[tuple[int, int]]:
    """[start, end) pieces of at most `block` tokens covering ids, each cut before a Bar in its second half,
    else before a Position there (an onset's notes stay together), else before a Pitch, else at the block;
    never right before a String (its Duration, whose logits choose it, stays in the same window).

    `notes` (layout 3: ids without String tokens, True at each note's Duration): each note counts two tokens
    against the block, itself and room for the String the model may write after it, so a window as a row reads
    it (its Strings in) still fits the block; and no cut falls inside a note (before its Velocity or Duration),
    so a note's Pitch is in the window that chooses its string."""
    out, start, n = [], 0, len(ids)
    while start < n:
        if notes is None:
            end = min(start + block, n)
        else:
            end, room = start, block
            while end < n and room >= 1 + notes[end]:
                room -= 1 + notes[end]
                end += 1
            end = max(end, start + 1)
        if end < n:
            half = start + max(1, (end - start) // 2)
            cut = end
            for kind in (v.bar, v.position, v.pitch_of):  # the first kind found in the second half
                cut = next((j for j in range(end, half, -1) if ids[j] in kind), None)
                if cut is not None:
                    break
            cut = end if cut is None else cut
            while ids[cut] in v.string_of and cut > start + 1:
                cut -= 1
            while notes is not None and (ids[cut] in v.duration or ids[cut] in v.velocity) and cut > start + 1:
                cut -= 1
            end = cut
        out.append((start, end))
        start = end
    return out


def _strip_strings(v: TabVocab, ids: Sequence[int]) -> list[int]:
    """Layout 3's teacher-forced tokens: the ids without their String tokens (placeholders: every note's string
    is chosen)."""
    return [int(i) for i in ids if i not in v.string_of]


def _cuts(ids: Sequence[int], block: int, v: TabVocab) -> list[tuple[int, int]]:
    """The windows `refinger` reads ids in, as [start, end) of ids themselves: `_windows` in layout 2; in layout 3
    `_windows` of the ids without Strings (`notes` counted), each window taking the Strings after its last note."""
    if not v.implied:
        return _windows(ids, block, v)
    keep = [j for j, i in enumerate(ids) if i not in v.string_of]
    teach = [int(ids[j]) for j in keep]
    at = keep + [len(ids)]
    return [(at[a] if a else 0, at[b]) for a, b in _windows(teach, block, v, v.note_ends(teach))]


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
        # Layout 3: the string index (0: String_1) each pitch writes no String for, as decoding reads it back.
        self.lowest = [lowest_fret_string(tuple(tuning), capo, p) - 1 for p in range(NO_PITCH + 1)]


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
    """Each id sequence with every note's string chosen by the model (see the module docstring); `guitars[k]`:
    the (tuning, capo) of sequence k. Everything but String tokens is returned as given; in tab layout 2 each String
    token is replaced by the model's, in layout 3 the ids' Strings are dropped and one written after each note the
    model puts off its lowest-fret string (so the length changes). `context`: windows of at most this many tokens
    (default and most: the model's block_size); a step's cost grows with the window, since each new token attends
    to every earlier one. `beam`: rows kept per window (1: the greedy choice); `batch_size` counts rows, so a
    batch holds batch_size // beam windows."""
    return _refinger(model, tokenizer, sequences, guitars, device, batch_size, context, beam)[0]


def _refinger(model, tokenizer, sequences, guitars, device, batch_size, context,
              beam) -> tuple[list[list[int]], list[float]]:
    """`refinger`, and with beam > 1 each sequence's log-likelihood as the beam scored it (the sum over its windows
    that choose a string; 0.0 with beam 1, which keeps no score)."""
    check_fingering_run(model, tokenizer)
    if len(guitars) != len(sequences):
        raise ValueError("one (tuning, capo) per sequence")
    if beam < 1:
        raise ValueError(f"beam must be at least 1, not {beam}")
    per_batch = max(1, batch_size // beam)
    out = [list(map(int, s)) for s in sequences]
    v = TabVocab(tokenizer)
    if v.implied:  # every note's string is chosen: the placeholders' String tokens go
        out = [_strip_strings(v, s) for s in out]
    device, v, rows = _string_windows(model, tokenizer, out, device, context)
    chosen_windows: dict[tuple[int, int], list[int]] = {}  # layout 3: (sequence, start) -> the window as chosen
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
                    run = _refinger_batch3 if v.implied else _refinger_batch
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
        block = _block(model, context)
        out = [[i for a, b in _windows(s, block, v, v.note_ends(s)) for i in chosen_windows.get((k, a), s[a:b])]
               for k, s in enumerate(out)]
    return out, scores


def _block(model, context: int | None) -> int:
    """The most tokens a window holds: `context`, at most the model's block_size."""
    return min(context or model.config.block_size, model.config.block_size)


def _string_windows(model, tokenizer, sequences: Sequence[Sequence[int]], device, context: int | None
                    ) -> tuple[torch.device, TabVocab, list[tuple[int, int, int]]]:
    """(the device, the vocabulary's tables, the windows (sequence, start, end) that choose a string, longest
    first: little padding in a batch): how `refinger` and fret_model's `string_logprobs` cut what they read
    (`_cuts`). A window chooses a string where it holds a String after its first token (layout 2), a note's
    Duration (layout 3). `device` None: the model's; `context`: windows of at most this many tokens (and the
    block_size)."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    v = TabVocab(tokenizer)
    block = _block(model, context)
    rows = [(k, a, b) for k, s in enumerate(sequences) for a, b in _cuts(s, block, v)]
    if v.implied:
        ends = [v.note_ends(s) for s in sequences]
        rows = [r for r in rows if any(ends[r[0]][r[1]:r[2]])]
    else:
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


def _allowed(rs: torch.Tensor, keys: list[tuple[int, int]], tok: torch.Tensor, pitch: torch.Tensor,
             taken: torch.Tensor, later: dict, groups: dict[int, tuple[_Rows, torch.Tensor]],
             win_groups: list[_Rows], string_ids: torch.Tensor, v: TabVocab,
             low: torch.Tensor | None = None) -> torch.Tensor:
    """(len(rs), MAX_STRINGS) bool: the strings each row of `rs` may take for its note (pitch `pitch`, per row of
    rs; `keys[i]`: its (window, position) in `later`): the constraint's, free at the onset, leaving room for the
    onset's later notes; else the fallbacks, in order. `low` (layout 3): each row's lowest-fret string index,
    allowed where the constraint lets the note end without a String (module docstring)."""
    B, device = tok.shape[0], tok.device
    allowed = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)
    fits = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)
    anys = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)
    pitch_all = torch.full((B,), NO_PITCH, dtype=torch.long, device=device)
    pitch_all[rs] = pitch
    if low is not None:
        low_all = torch.zeros(B, dtype=torch.long, device=device)
        low_all[rs] = low
        ends_note = torch.tensor(v.ends_note, device=device)
    for key in {id(win_groups[w]) for w, _ in keys}:
        g, grs = groups[key]
        m = g.constraint.mask(tok[grs])
        ok = m[:, string_ids]
        if low is not None:  # the lowest-fret string: String_<lowest> (an older constraint) or the note ending
            ok[torch.arange(len(grs), device=device), low_all[grs]] |= m[:, ends_note].any(1)
        allowed[grs] = ok
        fits[grs] = g.fits[pitch_all[grs]]
        anys[grs] = g.any_string
    free = ~taken[rs]
    chord = _leaves_room(keys, later, free, win_groups)  # the rest of the onset still fits
    ok = allowed[rs] & free & chord
    for wider in (fits[rs] & free & chord, allowed[rs] & free, fits[rs] & free, fits[rs], anys[rs]):
        ok = torch.where(ok.any(1, keepdim=True), ok, wider)
    return ok


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
        rs = torch.tensor([w * K + j for w in ws for j in range(K)], device=device)
        ok = _allowed(rs, [(w, t + 1) for w in ws for _ in range(K)], tok, plan.pitch[rs, t + 1], taken,
                      plan.later, groups, win_groups, string_ids, v)
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


@dataclass
class _Plan3:
    """Layout 3's teacher-forced windows of one `_refinger_batch3` call, one row per window, (W, longest + 1):
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


def _plan3(v: TabVocab, windows: list[list[int]], win_groups: list[_Rows]) -> _Plan3:
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


def _refinger_batch3(model, v: TabVocab, windows: list[list[int]], win_groups: list[_Rows], device: torch.device,
                     beam: int = 1) -> list[tuple[list[int], float]]:
    """Layout 3's `_refinger_batch`: teacher-force the windows (ids without String tokens), `beam` rows per window,
    each row with its own pointer into its window's tokens, choosing every note's string at its Duration (module
    docstring); returns, per window, the tokens its best row read (the window with its chosen Strings) and that
    row's score (its log-likelihood; 0.0 with beam 1)."""
    K, W = beam, len(windows)
    plan = _plan3(v, windows, win_groups)
    teach, length, note, pitch, low = (t.to(device) for t in (plan.teach, plan.length, plan.note, plan.pitch,
                                                              plan.low))
    S, B, pad_at = plan.steps, W * K, teach.shape[1] - 1
    win = torch.arange(B, device=device) // K  # each row's window
    n_teach = length[win]
    string_ids = torch.tensor(v.string_ids, device=device)
    not_string = torch.tensor(v.not_string, device=device)
    onset_ids = torch.tensor(sorted(v.onset), device=device)
    groups, local = _start_groups(win_groups, K, torch.zeros(B, 0, dtype=torch.long, device=device), device)
    taken = torch.zeros(B, MAX_STRINGS, dtype=torch.bool, device=device)  # strings taken at the current onset
    nxt = teach[win, 0]  # the token each row reads at this step
    ptr = torch.ones(B, dtype=torch.long, device=device)  # teacher tokens decided: the next is teach[ptr]
    fed = torch.zeros(B, dtype=torch.long, device=device)  # teacher index of the token read now (-1: String, PAD)
    out = torch.full((B, S), v.pad, dtype=torch.long, device=device)  # what each row has read
    # Beam search (K > 1): each row's log-likelihood (one row per window starts, as in `_refinger_batch`), the
    # slots it has decided, and per window the reference cost of its slots, cumulative (module docstring).
    score = torch.zeros(W, K, dtype=torch.float64, device=device)
    score[:, 1:] = float("-inf")
    score = score.view(B)
    slots = torch.ones(B, dtype=torch.long, device=device)  # the window's first token is decided, unscored
    ref = torch.zeros(W, S + 3, dtype=torch.float64, device=device)  # ref[w, k]: the costs of slots 0 .. k-1
    front = torch.ones(W, dtype=torch.long, device=device)  # slots whose reference cost is known
    cache = model.new_cache(B, S, device=device)
    for t in range(S):
        tok = nxt
        out[:, t] = tok
        logits = model(tok.unsqueeze(1), cache=cache)[0][:, -1]  # (B, V)
        for g, grs in groups.values():
            g.constraint.update(tok[grs])
        taken &= ~torch.isin(tok, onset_ids).unsqueeze(1)
        if t + 1 >= S:
            break
        at_end = ptr >= n_teach  # every teacher token decided
        x = teach[win, ptr.clamp(max=pad_at)]  # the next teacher token (PAD at the window's end)
        at = fed.clamp(min=0)
        choosing = (fed >= 0) & note[win, at]  # the row just read a note's Duration: its string is chosen now
        rs = choosing.nonzero().squeeze(1)
        rows = rs.tolist()
        if not rows and bool(at_end.all()):
            break  # every row has read its whole window
        low_all = torch.zeros(B, dtype=torch.long, device=device)
        first = torch.zeros(B, dtype=torch.long, device=device)  # each row's greedy option (0: read on)
        if rows:
            lows = low[win[rs], at[rs]]
            low_all[rs] = lows
            ok = _allowed(rs, [(r // K, j) for r, j in zip(rows, fed[rs].tolist())], tok, pitch[win[rs], at[rs]],
                          taken, plan.later, groups, win_groups, string_ids, v, lows)
            ar = torch.arange(len(rows), device=device)
            lg = logits[rs]
            options = lg.index_select(1, string_ids)  # the lowest string's: the note ends (no String)
            options[ar, lows] = lg.index_select(1, not_string).logsumexp(1)
            first[rs] = options.masked_fill(~ok, float("-inf")).argmax(1)
        src, pick = None, first
        if K > 1:
            C = MAX_STRINGS if rows else 1  # a choosing row's options; a row that reads on has one (column 0)
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
                lp = logp[rs]
                o = lp.index_select(1, string_ids)
                mass = lp.index_select(1, not_string).logsumexp(1)  # log p(no String): the lowest string
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
            reached = (slots.unsqueeze(1) + span).clamp(max=S + 2)
            front = _extend_reference(ref, front, raw, slots, reached, c1, c2)
            if rows:
                ws = sorted({r // K for r in rows})
                in_ws = torch.tensor([w * K + j for w in ws for j in range(K)], device=device)
                rank = raw[in_ws] - ref[win[in_ws].unsqueeze(1), reached[in_ws]]
                src, pick = _beam_select(ws, K, B, rank, first[in_ws])
                score, slots = raw[src, pick], reached[src, pick]
                _reorder(src, cache, groups.values(), local)
                ptr, at_end, x, choosing, low_all = ptr[src], at_end[src], x[src], choosing[src], low_all[src]
                taken, out = taken[src], out[src]
            else:
                score, slots = raw[:, 0], reached[:, 0]
        writes = choosing & (pick != low_all)  # a String for a string off the lowest fret
        nxt = torch.where(writes, string_ids[pick], x)
        reads = ~writes & ~at_end
        fed = torch.where(reads, ptr, -1)
        ptr = ptr + reads.long()
        cr = choosing.nonzero().squeeze(1)
        taken[cr, pick[cr]] = True
    best = score.view(W, K).argmax(1).tolist() if K > 1 else [0] * W  # the first of equals: the greedy row
    final = score.view(W, K).cpu().tolist()
    chosen = out.cpu().tolist()
    return [([i for i in chosen[w * K + best[w]] if i != v.pad], final[w][best[w]]) for w in range(W)]


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


def _leaves_room(keys: list[tuple[int, int]], later: dict, free: torch.Tensor,
                 win_groups: list[_Rows]) -> torch.Tensor:
    """(len(keys), MAX_STRINGS) bool, one row per (window, position) of `keys` (`free`: the row's free strings):
    choosing that string for the row's note at that position still leaves distinct free strings for the notes
    after it at the same onset (all True for a note that is last at its onset). Without this a greedy choice can
    take the one string a later, lower note needs."""
    out = torch.ones(len(keys), MAX_STRINGS, dtype=torch.bool)
    todo = [(i, key[0], later[key]) for i, key in enumerate(keys) if key in later]
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
    cuts, `_cuts`), of the log-probability of every token of the window after the first, given the window's
    earlier tokens; in layout 3, where a window ends on a note's Duration (its string the lowest-fret one), also
    the log-probability that no String follows it. What beam search maximises for each window; one plain forward
    pass per window, no cache."""
    check_fingering_run(model, tokenizer)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    v = TabVocab(tokenizer)
    block = _block(model, context)
    not_string = torch.tensor(v.not_string, device=device)
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.inference_mode():
            for seq in sequences:
                total = 0.0
                ends = v.note_ends(seq) if v.implied else None
                for a, b in _cuts(seq, block, v):
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
