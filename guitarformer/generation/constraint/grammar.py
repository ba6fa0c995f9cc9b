"""The tokenizer's grammar as tensors: which token may follow which, and each token's kind and value.

miditok's `tokens_types_graph` names the token types that may follow each type; here it becomes a (V, V)
matrix (row: the last token, column: the next one), so every tokenization miditok offers starts constrained
for free. Each token's kind (Pitch, Duration, Bar, ...) and value are read once, for the guitar state
(timing.py, strings.py) to index.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import miditok
import symusic
import torch

from guitarformer.vocab.controls import BAR as BAR_SCOPE, control_names, control_type
from guitarformer.vocab.tab_techniques import TECH_VALUES
from guitarformer.vocab.parts import DRUM, PART
from guitarformer.vocab.tab_tokens import implied_strings
from guitarformer.music.guitar import GUITAR_PROGRAM

_BUILT_LOCK = threading.Lock()  # Grammar.of's cache and each grammar's `derived` tables
DERIVED_KEPT = 32  # guitars (tuning, capo, hand region) whose constraint tables a grammar keeps: a page's asks vary
NO_PITCH = 128  # a dummy pitch column: empty string slots, tokens that are not notes

# Kinds of token, as bits: the constraint updates only the parts of its state that the kinds present can change.
BAR, TIMESIG, POSITION, SHIFT, PITCH, DURATION, NOTE_OFF, STRING = 1, 2, 4, 8, 16, 32, 64, 128
ALL_KINDS = 255

_NOT_ON_A_GUITAR = ("PAD", "BOS", "MASK", "PitchDrum", "DrumOn", "DrumOff")  # never generated after BOS
_LAYOUT = ("FillBar", "FillStart", "FillEnd")  # bar infilling's placeholders (vocab/infill.py): its sampler's own


def _first_type(tokenizer) -> str:
    """The type of the first token the tokenizer writes for a one-note score (REMI: Bar; TSD: TimeSig ...)."""
    s = symusic.Score(tokenizer.time_division)
    s.tempos.append(symusic.Tempo(0, 120))
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=GUITAR_PROGRAM)
    tr.notes.append(symusic.Note(0, tokenizer.time_division, 64, 100))
    s.tracks.append(tr)
    seq = tokenizer.encode(s)
    seq = seq[0] if isinstance(seq, list) else seq
    return str(seq.tokens[0]).split("_")[0]


def _successors(tokenizer, types: list[str], bos: int) -> torch.Tensor:
    """(V, V) bool, may column follow row, from miditok's `tokens_types_graph` (`types`: each token's type): no
    token that is never on a guitar (or a layout placeholder) follows any, after BOS only the type the tokenizer
    starts a piece with, and a note's techniques in their order (`_technique_order`)."""
    V = len(types)
    type_ids: dict[str, list[int]] = {}
    for i, t in enumerate(types):
        type_ids.setdefault(t, []).append(i)

    graph = getattr(tokenizer, "tokens_types_graph", {})
    M = torch.zeros(V, V, dtype=torch.bool)
    for t, nxt in graph.items():
        cols = sorted({j for nt in nxt for j in type_ids.get(nt.split("_")[0], [])})
        if cols and t in type_ids:
            M[torch.tensor(type_ids[t]).unsqueeze(1), torch.tensor(cols).unsqueeze(0)] = True
    for t in _NOT_ON_A_GUITAR + _LAYOUT:
        M[:, type_ids.get(t, [])] = False
    # After BOS a piece starts the way the tokenizer itself starts one.
    M[bos] = False
    M[bos, type_ids.get(_first_type(tokenizer), [])] = True
    _technique_order(M, [str(tokenizer[i]) for i in range(V)])
    return M


def _technique_order(M: torch.Tensor, toks: list[str]) -> None:
    """A note's techniques come once each, in their fixed order (vocab/tab_techniques.py): after a Tech token only
    later ones, after a Bend no other Bend, after either no Bend (a model looping on Tech_PalmMute wrote 2,000 of
    them on one note, which the type graph alone allows)."""
    order = {f"Tech_{v}": k for k, v in enumerate(TECH_VALUES)}
    techs = [(i, order[t]) for i, t in enumerate(toks) if t in order]
    bends = torch.tensor([i for i, t in enumerate(toks) if t.startswith("Bend_")], dtype=torch.long)
    for i, k in techs:
        for j, later in techs:
            if later <= k:
                M[i, j] = False
        M[i, bends] = False
    for i in bends.tolist():
        M[i, bends] = False


def keep(m: torch.Tensor, cols: slice | int | torch.Tensor, ok: torch.Tensor) -> None:
    """m[:, cols] &= ok in place: on a slice or one id, the view's own op (`m[:, cols] &= ok` would also write the
    view back onto itself: one more op a rule a token); ids as a tensor index as usual."""
    if isinstance(cols, torch.Tensor):
        m[:, cols] &= ok
    else:
        m[:, cols].bitwise_and_(ok)


def allow(m: torch.Tensor, cols: slice | int | torch.Tensor, ok: torch.Tensor) -> None:
    """m[:, cols] |= ok in place, as `keep`."""
    if isinstance(cols, torch.Tensor):
        m[:, cols] |= ok
    else:
        m[:, cols].bitwise_or_(ok)


def _cut(cols: torch.Tensor) -> slice | torch.Tensor:
    """`cols` (ids, ascending or not) as a slice where they are one ascending run, else as they are."""
    c = cols.tolist()
    return slice(c[0], c[0] + len(c)) if c and c == list(range(c[0], c[0] + len(c))) else cols


class Grammar:
    """Per-token tables of one tokenizer (V = vocabulary size), on `device`.

    `allowed` (V, V): may column follow row. `is_<kind>` (V,) bool per token kind; `<kind>_cols` the ids of
    that kind (`<kind>_at`: the same columns as a slice where they are one run, for the constraint's masks;
    `is_bar_ctrl`: the bar control tokens, which come between a Bar and its TimeSig/Position, so a
    bar is open after either); `pitch_val`/`pos_val`/`string_val` (V,) the value of Pitch/NoteOn/NoteOff, Position and String
    tokens. Tab tokens: `string_cols` the String ids in string order (`tab`: there are some), `hammer` the id
    of Tech_Hammer (-1: none); `implied` (tab layout 3): a note on its lowest-fret string has no String token, so
    its Duration may be followed by the tokens in `note_end` (V,) (`note_end_cols`): what may follow a Duration other
    than a String (Bend, Tech, and whatever may follow a whole note), each of which ends the note on that string.
    `mid_note` (V,): a note begun but not whole after this token. The
    `may_<kind>` lists (host side) say, per last token, whether a token of that kind may come next at all,
    and `kind_bits` which kinds (BAR ... NOTE_OFF) each token is: a constraint on CPU skips the work for
    kinds that cannot come or tokens that change nothing.
    """

    _built: OrderedDict[tuple[int, int, str], tuple[object, Grammar]] = OrderedDict()  # `of`'s last few

    @classmethod
    def of(cls, tokenizer, device: torch.device | str = "cpu") -> Grammar:
        """The tokenizer's grammar on `device`, built once for the last few tokenizers asked (a grammar is read-only:
        nothing writes its tables once built). Building one is a real share of a riff's constrained sampling, which every
        constrained `generate` call paid before. The entry holds its tokenizer, so an id in the key is never
        another tokenizer's; one grown since (`prepare --like` adds styles) has another length and gets its own."""
        key = (id(tokenizer), len(tokenizer), str(torch.device(device)))
        with _BUILT_LOCK:  # the studio serves requests from a thread pool
            hit = cls._built.get(key)
            if hit is None or hit[0] is not tokenizer:
                hit = cls._built[key] = (tokenizer, cls(tokenizer, device))
            cls._built.move_to_end(key)
            while len(cls._built) > 4:
                cls._built.popitem(last=False)
            return hit[1]

    def __init__(self, tokenizer, device: torch.device | str = "cpu") -> None:
        V = len(tokenizer)
        # The tokenization family: TabREMI is REMI with string and technique tokens after each note's Duration.
        self.V, self.kind = V, "REMI" if isinstance(tokenizer, miditok.REMI) else type(tokenizer).__name__
        self.bos, self.eos = tokenizer["BOS_None"], tokenizer["EOS_None"]
        toks = [str(tokenizer[i]) for i in range(V)]
        self.types = [t.split("_")[0] for t in toks]
        self.values = [t.split("_", 1)[1] if "_" in t else "" for t in toks]
        M = _successors(tokenizer, self.types, self.bos)

        def mark(*names: str) -> torch.Tensor:
            return torch.tensor([t in names for t in self.types])

        is_pitch, is_off, is_dur, is_vel = mark("Pitch", "NoteOn"), mark("NoteOff"), mark("Duration"), mark("Velocity")
        is_bar, is_pos, is_shift = mark("Bar"), mark("Position"), mark("TimeShift")
        is_bar_ctrl = mark(*(control_type(n) for n in control_names(BAR_SCOPE)))
        is_timesig, is_tempo, is_eos = mark("TimeSig"), mark("Tempo"), mark("EOS")
        self.is_band = mark(PART, DRUM)  # host side: a band tokenizer's part and drum tokens (vocab/parts.py)
        pitch_val = torch.tensor([int(v) if t in ("Pitch", "NoteOn", "NoteOff") else NO_PITCH
                                  for t, v in zip(self.types, self.values)])
        pos_val = torch.tensor([int(v) if t == "Position" else 0 for t, v in zip(self.types, self.values)])
        is_string = mark("String")
        string_val = torch.tensor([int(v) if t == "String" else 0 for t, v in zip(self.types, self.values)])
        self.tab = bool(is_string.any())
        self.implied = self.tab and implied_strings(tokenizer)
        # A note is whole after its Duration, or for tab tokens of layout 2 after its String (layout 3 writes no
        # String for a note on its lowest-fret string: its Duration may be the note's last token).
        mid_note = is_pitch | is_vel | (is_dur if self.tab and not self.implied else torch.zeros_like(is_dur))
        M[mid_note | is_pos | is_tempo, self.eos] = False  # no end mid-note, nor on a step opened for one

        def cols(m: torch.Tensor) -> torch.Tensor:
            return m.nonzero().squeeze(1)

        # Host side, before the move: which kinds may follow each last token, which kinds each token is.
        def may_follow(kind: torch.Tensor) -> list[bool]:
            c = cols(kind)
            return M[:, c].any(1).tolist() if c.numel() else [False] * V

        self.may_pitch, self.may_pos, self.may_dur = may_follow(is_pitch), may_follow(is_pos), may_follow(is_dur)
        self.may_timesig, self.may_shift = may_follow(is_timesig), may_follow(is_shift)
        self.may_string, self.may_bar, self.may_eos = may_follow(is_string), may_follow(is_bar), may_follow(is_eos)
        self.whole_after = (~mid_note).tolist()  # per last token: no note is left in the middle (a row may finish)
        # Layout 3: what ends a note after its Duration without naming a string (none with layout 2).
        note_end = (M[is_dur].any(0) & ~is_string) if self.implied else torch.zeros(V, dtype=torch.bool)
        self.may_note_end = may_follow(note_end)
        self.hammer = toks.index("Tech_Hammer") if "Tech_Hammer" in toks else -1
        self.may_hammer = M[:, self.hammer].tolist() if self.hammer >= 0 else [False] * V
        bits = torch.zeros(V, dtype=torch.long)
        for flag, kind in ((BAR, is_bar), (TIMESIG, is_timesig), (POSITION, is_pos), (SHIFT, is_shift),
                           (PITCH, is_pitch), (DURATION, is_dur), (NOTE_OFF, is_off), (STRING, is_string)):
            bits |= kind.long() * flag
        self.kind_bits = bits.tolist()  # per token: which parts of the state it can change (0: none)

        dev = torch.device(device)
        self.allowed = M.to(dev)
        self.is_pitch, self.is_off, self.is_dur, self.is_vel = (t.to(dev) for t in (is_pitch, is_off, is_dur, is_vel))
        self.is_bar, self.is_pos, self.is_shift = (t.to(dev) for t in (is_bar, is_pos, is_shift))
        self.is_bar_ctrl = is_bar_ctrl.to(dev)
        self.is_timesig, self.is_eos = is_timesig.to(dev), is_eos.to(dev)
        self.pitch_val, self.pos_val = pitch_val.to(dev), pos_val.to(dev)
        self.is_string, self.string_val, self.mid_note = is_string.to(dev), string_val.to(dev), mid_note.to(dev)
        self.note_end = note_end.to(dev)
        self.note_end_cols = cols(self.note_end)
        self.string_cols = torch.tensor(sorted(cols(is_string).tolist(), key=lambda i: string_val[i]),
                                        dtype=torch.long, device=dev)
        self.pitch_cols, self.off_cols, self.dur_cols = cols(self.is_pitch), cols(self.is_off), cols(self.is_dur)
        self.pos_cols, self.shift_cols, self.ts_cols = cols(self.is_pos), cols(self.is_shift), cols(self.is_timesig)
        self.bar_cols = cols(self.is_bar)
        self.time_cols = cols(self.is_shift | is_tempo.to(dev) | self.is_timesig)  # tokens that move on in time
        self.finishing = self.is_off | self.is_eos | self.is_vel | self.is_dur  # what may follow the last bar's end
        self.pitch_cols_val, self.off_cols_val = self.pitch_val[self.pitch_cols], self.pitch_val[self.off_cols]
        self.pos_cols_val = self.pos_val[self.pos_cols]
        # The same columns for the constraint's per-token masks: a slice where they are one run of ids (MidiTok gives
        # each type's values consecutive ids), so `m[:, cut] &= x` works on a view instead of an index and an
        # index_put (at batch 1 the mask is a few dozen such small ops a token).
        self.pitch_at, self.off_at, self.dur_at = _cut(self.pitch_cols), _cut(self.off_cols), _cut(self.dur_cols)
        self.pos_at, self.shift_at, self.ts_at = _cut(self.pos_cols), _cut(self.shift_cols), _cut(self.ts_cols)
        self.bar_at, self.time_at = _cut(self.bar_cols), _cut(self.time_cols)
        self.string_at, self.note_end_at = _cut(self.string_cols), _cut(self.note_end_cols)
        self.pitch_val_at, self.off_val_at = _cut(self.pitch_cols_val), _cut(self.off_cols_val)
        self._derived: OrderedDict[tuple, object] = OrderedDict()  # `derived`'s tables, the last DERIVED_KEPT asked

    def derived(self, key: tuple, build):
        """`build()`, made once per grammar and `key` (the last DERIVED_KEPT keys are kept): the read-only tables a
        constraint's parts derive from the tokenizer and the guitar (timing.TimeState's tick tables,
        strings.StringState's per-pitch ones for a tuning, capo and hand region). Building them is Python loops over
        the vocabulary and the pitches, too slow to repeat for every constraint; the grammar itself is kept per tokenizer (`of`), so a process's later riffs find them
        built. Two threads building at once build the same tables; the one kept is the first stored."""
        with _BUILT_LOCK:
            got = self._derived.get(key)
            if got is not None:
                self._derived.move_to_end(key)
                return got
        built = build()
        with _BUILT_LOCK:
            got = self._derived.setdefault(key, built)
            self._derived.move_to_end(key)
            while len(self._derived) > DERIVED_KEPT:
                self._derived.popitem(last=False)
            return got

    def kinds(self, tokens: list[int]) -> int:
        """The kinds (bits) among these tokens: 0 when none of them changes the guitar state."""
        bits = 0
        for t in tokens:
            bits |= self.kind_bits[t]
        return bits

    def every(self, tokens: list[int]) -> int:
        """The kinds (bits) every one of these tokens is (a token is one kind): where a step's rows are all, say,
        Positions, the state updates need no per-row choice (`torch.where`) between the rows that moved and the rest."""
        bits = -1
        for t in tokens:
            bits &= self.kind_bits[t]
        return bits if tokens else 0
