"""The row machinery both of tab_model.py's beam searches share (tab layout 2, where every note writes a String,
and layout 3, tab_implied.py, where a note on its lowest-fret string writes none).

`TabVocab`: the token tables the refingering loop reads. The windows a sequence is read in (`window_spans`,
`window_cuts`, `string_windows`, which combined.py's `string_logprobs` reads too). A batch's rows: `RowGroup`, one
(tuning, capo) group's constraint and which strings can play each pitch, `start_groups` starting each group's
constraint on its rows, `reorder_rows` moving every per-row state (the KV cache, kept in slots by `SlotCache`, and the
constraints' `_row_state`) when beam search re-ranks rows. `allowed_strings` (reading a batch's `ChoiceTables`): the
strings a row may take for a note (the constraint's, free at the onset, leaving room for the onset's later notes:
`_leaves_room`, `_matchable`; else the fallbacks). These names are public because tab_model.py and tab_implied.py
both run on them. Held apart from tab_model.py so that module keeps the public API and layout 2's search, and
tab_implied.py layout 3's, neither importing the other's search; what each choice means is tab_model.py's module
docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from guitarformer.vocab.tab_tokens import MAX_STRINGS, closes_note, implied_strings, lowest_fret_string, note_offset
from guitarformer.generation.constraint.guitar import GuitarConstraint
from guitarformer.generation.constraint.grammar import NO_PITCH
from guitarformer.music.guitar import MAX_FRET, pitch_of

Guitar = tuple[tuple[int, ...], int]  # (tuning lowest string first, capo)
NOT_FRETTED = ("Tech_Dead", "Tech_HarmNatural")  # a note with one of these has no fretted pitch to compare


class TabVocab:
    """Token tables the refingering loop reads: String ids, what starts an onset, what ends a note's tail, where a
    note's Duration is; `implied`: tab layout 3 (a note on its lowest-fret string writes no String)."""

    def __init__(self, tokenizer) -> None:
        toks = [str(tokenizer[i]) for i in range(len(tokenizer))]
        self.names = toks
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
        """Per token of `ids`: it is the Duration of a whole note (`tab_tokens.closes_note`): where layout 3's
        string is chosen."""
        toks = [self.names[i] for i in ids]
        return [closes_note(toks, j, self.velocities) for j in range(len(toks))]

    def note_pitch(self, ids: Sequence[int], j: int) -> int:
        """The pitch of the note whose Duration is ids[j]."""
        return self.pitch_of[ids[j - self.offset + 1]]


def window_spans(ids: Sequence[int], block: int, v: TabVocab,
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


def strip_strings(v: TabVocab, ids: Sequence[int]) -> list[int]:
    """Layout 3's teacher-forced tokens: the ids without their String tokens (placeholders: every note's string
    is chosen)."""
    return [int(i) for i in ids if i not in v.string_of]


def window_cuts(ids: Sequence[int], block: int, v: TabVocab) -> list[tuple[int, int]]:
    """The windows `refinger` reads ids in, as [start, end) of ids themselves: `window_spans` in layout 2; in layout 3
    `window_spans` of the ids without Strings (`notes` counted), each window taking the Strings after its last note."""
    if not v.implied:
        return window_spans(ids, block, v)
    keep = [j for j, i in enumerate(ids) if i not in v.string_of]
    teach = [int(ids[j]) for j in keep]
    at = keep + [len(ids)]
    return [(at[a] if a else 0, at[b]) for a, b in window_spans(teach, block, v, v.note_ends(teach))]


class RowGroup:
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


def window_size(model, context: int | None) -> int:
    """The most tokens a window holds: `context`, at most the model's block_size."""
    return min(context or model.config.block_size, model.config.block_size)


def string_windows(model, tokenizer, sequences: Sequence[Sequence[int]], device, context: int | None
                    ) -> tuple[torch.device, TabVocab, list[tuple[int, int, int]]]:
    """(the device, the vocabulary's tables, the windows (sequence, start, end) that choose a string, longest
    first: little padding in a batch): how `refinger` and fret_model's `string_logprobs` cut what they read
    (`window_cuts`). A window chooses a string where it holds a String after its first token (layout 2), a note's
    Duration (layout 3). `device` None: the model's; `context`: windows of at most this many tokens (and the
    block_size)."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    v = TabVocab(tokenizer)
    block = window_size(model, context)
    rows = [(k, a, b) for k, s in enumerate(sequences) for a, b in window_cuts(s, block, v)]
    if v.implied:
        ends = [v.note_ends(s) for s in sequences]
        rows = [r for r in rows if any(ends[r[0]][r[1]:r[2]])]
    else:
        rows = [r for r in rows if any(sequences[r[0]][j] in v.string_of for j in range(r[1] + 1, r[2]))]
    rows.sort(key=lambda r: r[1] - r[2])
    return device, v, rows


def start_groups(win_groups: list[RowGroup], K: int, x: torch.Tensor, device: torch.device
                  ) -> tuple[dict[int, tuple[RowGroup, torch.Tensor]], torch.Tensor]:
    """Each (tuning, capo) group with its rows, its constraint started on them; and each row's index among its
    group's rows (which beam search's reordering needs)."""
    member: dict[int, tuple[RowGroup, list[int]]] = {}
    for r in range(x.shape[0]):
        g = win_groups[r // K]
        member.setdefault(id(g), (g, []))[1].append(r)
    groups: dict[int, tuple[RowGroup, torch.Tensor]] = {}
    local = torch.zeros(x.shape[0], dtype=torch.long)
    for key, (g, rs) in member.items():
        groups[key] = (g, torch.tensor(rs, device=device))
        local[rs] = torch.arange(len(rs))
        g.constraint.start(x[groups[key][1], :0])
    return groups, local.to(device)


@dataclass(frozen=True)
class ChoiceTables:
    """What a batch's string choices read, fixed for one refingering call: the vocabulary's tables `v`, each
    window's `RowGroup` (`win_groups`), the groups with their rows (`start_groups`), `later[(window, position)]` the
    fit masks of the onset's notes after the one chosen there, and the String ids on the device."""

    v: TabVocab
    win_groups: list[RowGroup]
    groups: dict[int, tuple[RowGroup, torch.Tensor]]
    later: dict[tuple[int, int], tuple[int, ...]]
    string_ids: torch.Tensor


def allowed_strings(tables: ChoiceTables, rs: torch.Tensor, keys: list[tuple[int, int]], tok: torch.Tensor,
                    pitch: torch.Tensor, taken: torch.Tensor, low: torch.Tensor | None = None) -> torch.Tensor:
    """(len(rs), MAX_STRINGS) bool: the strings each row of `rs` may take for its note (pitch `pitch`, per row of
    rs; `keys[i]`: its (window, position) in `tables.later`): the constraint's, free at the onset, leaving room for
    the onset's later notes; else the fallbacks, in order. `low` (layout 3): each row's lowest-fret string index,
    allowed where the constraint lets the note end without a String (module docstring)."""
    v, win_groups, groups, later, string_ids = (tables.v, tables.win_groups, tables.groups, tables.later,
                                                tables.string_ids)
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


class SlotCache:
    """A beam's KV cache whose rows live in slots: row r's keys and values, and the model's other per-row cache state
    (its last token, the copy head's matches), are in slot `slot[r]`. When beam search re-ranks the rows, the first
    row descended from each old row takes that row's slot as it is, and only its other descendants are copies (into
    the slots of rows that left none): moving each re-ranked row to its own index copied every moved row's cache, up
    to the whole context, every choice (a tenth of `tab --run`'s time on a long piece). `read` feeds the rows' tokens
    to the model in slot order and gives their logits back in row order."""

    def __init__(self, model, B: int, T: int, device: torch.device) -> None:
        self.model, self.cache = model, model.new_cache(B, T, device=device)
        self.slot = self.row = None  # row -> slot and slot -> row; None: each row in its own slot

    def read(self, tokens: torch.Tensor) -> torch.Tensor:
        """The model's logits (B, T, V) for each row's next tokens (B, T), against the rows' caches."""
        if self.slot is None:
            return self.model(tokens, cache=self.cache)[0]
        return self.model(tokens.index_select(0, self.row), cache=self.cache)[0].index_select(0, self.slot)

    def reorder(self, src: torch.Tensor) -> int:
        """Row r's cache becomes what row src[r]'s was; returns how many rows' caches were copied."""
        B, parents = len(src), src.tolist()
        slot = self.slot.tolist() if self.slot is not None else list(range(B))
        has_child = set(parents)
        spare = [slot[r] for r in range(B) if r not in has_child]  # slots whose row left no descendant
        new, used, dst, frm = [], set(), [], []
        for p in parents:
            s = slot[p]
            if s in used:  # a second descendant: a copy of its parent's slot in a spare one
                dst.append(spare.pop())
                frm.append(s)
                s = dst[-1]
            used.add(s)
            new.append(s)
        if dst:
            cache, n = self.cache, self.cache.length
            dst_t = torch.tensor(dst, device=src.device)
            frm_t = torch.tensor(frm, device=src.device)
            for kv in (cache.k, cache.v):  # slot to slot in place: indexing both sides with the index tensors
                for buf in kv:  # gathered a temporary and scattered it, several times the copying
                    if buf is not None:
                        for d, f in zip(dst, frm):
                            buf[d, :, :n].copy_(buf[f, :, :n])
            if cache.last is not None:  # a decoder with model.prev_token: each row's last token
                cache.last[dst_t] = cache.last[frm_t]
            if cache.match is not None:  # model.copy: each row's tokens and n-gram hashes
                cache.match.reorder(dst_t, frm_t)
        if new == list(range(B)):
            self.slot = self.row = None
        else:
            self.slot = torch.tensor(new, device=src.device)
            self.row = torch.argsort(self.slot)
        return len(dst)


def reorder_rows(src: torch.Tensor, cache: SlotCache, groups, local: torch.Tensor) -> None:
    """Row r of every per-row state becomes what row src[r] was: the KV cache (`SlotCache.reorder`) and each
    group's constraint."""
    if not bool((src != torch.arange(len(src), device=src.device)).any()):
        return
    cache.reorder(src)
    for g, rs in groups:
        lsrc = local[src[rs]]  # a row's source is in its own window, so in its group
        if bool((lsrc != torch.arange(len(rs), device=rs.device)).any()):
            for obj, name in g.row_state:
                setattr(obj, name, getattr(obj, name)[lsrc])


def _leaves_room(keys: list[tuple[int, int]], later: dict, free: torch.Tensor,
                 win_groups: list[RowGroup]) -> torch.Tensor:
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
