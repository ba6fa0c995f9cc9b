"""Tab-native tokens: REMI whose every note also carries its string and its playing techniques, in fewer tokens
per note than REMI.

A note is ``Pitch [Velocity] Duration [String] [Bend] [Tech ...]``. The String is written only where the note
leaves its lowest-fret string (`lowest_fret_string`: the string that plays its pitch at the lowest fret in the
piece's tuning and capo); a note without one is on that string. Most notes are (90% of the built-in corpus's, 58-84%
of human tabs'), so a note costs ``Pitch Duration`` where REMI writes ``Pitch Velocity Duration``, and the String
tokens left are the choices a guitarist makes against the obvious string. Velocity is there only where the data
has dynamics (the ``tab_velocities`` parameter, which tokenizer.json saves and states). MidiTok's REMI reads
Velocity and Duration at fixed offsets after Pitch and skips token types it does not know, so String and technique
tokens go after Duration. The fret follows from pitch, string, tuning and capo (`music.guitar.fret_of`), so the
pitch stays explicit for everything that reads pitches (features, MIDI, the n-gram, the sampler's constraint).

`TabREMI` is a MidiTok tokenizer in its own right: `tok.encode(guitar_score)` writes the strings and
techniques (a bare symusic Score has none: each note takes its lowest-fret string in standard tuning), and
`tok.decode(ids, tuning=..., capo=...)` gives back a GuitarScore with strings, frets and techniques. A symusic
Note holds no string, so `encode` hands the notes' strings and techniques to `_create_track_events` in a side
table keyed by (time, pitch) after MidiTok's own preprocessing, each string preprocessed on its own so that
quantisation cannot mix two strings' notes up. tokenizer.json save/load, BPE, `tokens_types_graph` (extended
with String, Bend and Tech) and `tokens_errors` are MidiTok's. Techniques as tokens: vocab/tab_techniques.py.

The layout is versioned (the ``tab_layout`` parameter; `data.tab_layout` chooses it at prepare time): 3, the
above, the default and the shipped model's; 2, a String on every note (``Pitch Duration String``: older runs',
still read, sampled and fingered); a dataset or run of the first layout (``Pitch Velocity Duration String`` always) is refused by
`check_layout` with the fix (prepare again). Decoding needs the tuning and capo to give a note without a String its
string (`resolve_strings`): the same tokens are another fingering in another tuning, as a tab's numbers are.

With controls on (the tokenizer config's ``guitar_controls`` parameter, off by default), the vocabulary also holds
the control tokens of vocab/controls.py: piece controls (``CtrlTuning CtrlCapo CtrlKey CtrlStyle``) right after BOS,
bar controls (``CtrlDensity CtrlPoly CtrlPos CtrlPM CtrlTech``) right after each Bar, each optional, always in that
order. `insert_controls` writes them into a piece's ids from its own decoded notes; `strip_controls` takes them out.
The style vocabulary depends on the dataset, so it is kept in that same parameter, which tokenizer.json saves; a
dataset prepared to fine-tune a run (`prepare --like RUN`) adds the styles that run lacks after the whole vocabulary
(the parameter's ``added_styles``), so the ids the run's model knows never move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import miditok
import numpy as np
import symusic
from miditok.classes import Event

from guitarformer.vocab.controls import (
    BAR,
    PIECE,
    PREFIX,
    PlayedNote,
    bar_controls,
    control_names,
    control_token,
    control_type,
    control_vocabulary,
    piece_controls,
    style_name,
)
from guitarformer.vocab.infill import FILL_TOKENS, extend_graph, infill_on
from guitarformer.vocab.parts import DRUM, PART, band_roles, band_vocabulary, extend_band_graph
from guitarformer.vocab.tab_techniques import (
    MAX_BEND_QUARTER_TONES,
    TECH_VALUES,
    canonical,
    technique_of,
    technique_tokens,
)
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.music.guitar import STANDARD_TUNING, fret_of
from guitarformer.music.score import PLAIN, UNPLAYABLE, GuitarScore, Technique

__all__ = ["MAX_STRINGS", "TabREMI", "canonical", "check_layout", "decode_tab", "technique_of", "technique_tokens"]

MAX_STRINGS = 8
CONTROLS_PARAM = "guitar_controls"  # TokenizerConfig parameter: {"styles": [...]} turns controls on
ADDED_STYLES = "added_styles"  # its list of styles appended after the whole vocabulary (control_params)
LAYOUT_PARAM, LAYOUT = "tab_layout", 3  # 1 (no parameter): Pitch Velocity Duration String, Velocity always;
# 2: a String on every note; 3: a String only where the note leaves its lowest-fret string (module docstring)
LAYOUTS_READ = (2, 3)
VELOCITY_PARAM = "tab_velocities"  # True: the data has dynamics, each note keeps its Velocity
# The highest fret decoding keeps (three octaves): human tabs write frets past the 24 the sampler plays (up to 29
# in the shared Guitar Pro files); a higher one means the tokens were written for another tuning.
WRITTEN_FRETS = 36
TAB_TYPES = ("String", "Bend", "Tech")
_NOT_NOTES = ("BOS", "EOS", "PAD", "MASK", PART, DRUM, *TAB_TYPES)  # what REMI decoding is not given
_SideTable = dict[tuple[int, int], list[tuple[int, int, Technique]]]  # (time, pitch) -> [(duration, string, tech)]


def tab_params(velocities: bool, layout: int = LAYOUT) -> dict[str, Any]:
    """The TokenizerConfig arguments of the tab layout: with `velocities` (the data has dynamics) a Velocity per
    note, else none (and tokenizer.json says why); `layout` 3 (a String only where a note leaves its lowest-fret
    string) or 2 (a String on every note)."""
    if layout not in LAYOUTS_READ:
        raise GuitarformerError(f"tab layout {layout} does not exist", "use data.tab_layout 3 (or 2)")
    return {"use_velocities": velocities, LAYOUT_PARAM: layout,
            VELOCITY_PARAM: "kept: the data has dynamics" if velocities else "none: the data has one velocity"}


class TabREMI(miditok.REMI):
    """REMI with ``String_<1..8>`` after a note's Duration where the note leaves its lowest-fret string (layout 3;
    after every note in layout 2), technique tokens after it, and Velocity only where the data has dynamics
    (module docstring)."""

    _side: _SideTable | None = None  # the strings and techniques of the score being encoded (encode)
    _guitar: tuple[tuple[int, ...], int] = (STANDARD_TUNING, 0)  # its tuning and capo

    def _tweak_config_before_creating_voc(self) -> None:
        super()._tweak_config_before_creating_voc()
        params = self.config.additional_params
        params.setdefault(LAYOUT_PARAM, LAYOUT)
        params.setdefault(VELOCITY_PARAM, "kept: the data has dynamics" if self.config.use_velocities
                          else "none: the data has one velocity")

    def _create_base_vocabulary(self) -> list[str]:
        vocab = super()._create_base_vocabulary()
        vocab += [f"String_{s}" for s in range(1, MAX_STRINGS + 1)]
        vocab += [f"Bend_{q}" for q in range(1, MAX_BEND_QUARTER_TONES + 1)]
        vocab += [f"Tech_{v}" for v in TECH_VALUES]
        if infill_on(self):  # bar infilling (vocab/infill.py): after the tab tokens, so that none of theirs moves
            vocab += list(FILL_TOKENS)
        if has_controls(self):
            base, added = _style_lists(self)
            vocab += control_vocabulary(base)
            # Styles a fine-tuning dataset added to an init run's vocabulary (tokenization.extended_tokenizer): last of
            # all, in the order they were added, so every id the init run's model knows keeps its row.
            vocab += [control_token("Style", s) for s in added]
        roles = band_roles(self)
        if roles:  # the band stream's part and drum tokens (data/parts.py): after everything, so no id moves
            vocab += band_vocabulary(roles)
        return vocab

    def _create_token_types_graph(self) -> dict[str, set[str]]:
        graph = super()._create_token_types_graph()
        after_note = set(graph["Duration"])  # what may follow a whole note in REMI
        # Layout 3: a note on its lowest-fret string has no String, so a Duration also ends a note.
        graph["Duration"] = (after_note | {"String", "Bend", "Tech"}) if implied_strings(self) else {"String"}
        graph["String"] = after_note | {"Bend", "Tech"}
        graph["Bend"] = after_note | {"Tech"}
        graph["Tech"] = after_note | {"Tech"}
        if control_styles(self) is not None:
            # Each control may be left out, so each one leads to any later one of its group or past the group.
            piece = [control_type(n) for n in control_names(PIECE)]
            for k, t in enumerate(piece):  # reached only from BOS (miditok lets BOS lead to any type)
                graph[t] = set(piece[k + 1:]) | {"Bar"}
            bar = [control_type(n) for n in control_names(BAR)]
            after_bar = set(graph["Bar"])
            for k, t in enumerate(bar):
                graph[t] = set(bar[k + 1:]) | after_bar
            graph["Bar"] = after_bar | set(bar)
        graph = extend_graph(graph) if infill_on(self) else graph
        roles = band_roles(self)
        return extend_band_graph(graph, roles) if roles else graph

    # ------------------------------------------------------------ encoding

    def encode(self, score: GuitarScore | symusic.Score, encode_ids: bool = True, no_preprocess_score: bool = False,
               attribute_controls_indexes: Mapping[int, Mapping[int, Sequence[int] | bool]] | None = None
               ) -> miditok.TokSequence | list[miditok.TokSequence]:
        """MidiTok's encode; a GuitarScore's notes take their strings (its `frets`) and techniques along. A part
        with more strings than the tokenizer holds is a SkipFile (prepare writes it as the file's reason)."""
        if isinstance(score, GuitarScore):
            if len(score.tuning) > MAX_STRINGS:
                raise SkipFile(f"a {len(score.tuning)}-string tuning: tab tokens hold at most {MAX_STRINGS} strings")
            if score.frets is None:
                raise GuitarformerError("tab tokens need a fingering", "call fingering.fret() for sources without one")
            self._side, self._guitar = _side_table(self, score), (score.tuning, score.capo)
            score = score.score
        try:
            return super().encode(score, encode_ids, no_preprocess_score, attribute_controls_indexes)
        finally:
            self._side, self._guitar = None, (STANDARD_TUNING, 0)

    def _create_track_events(self, track: symusic.Track, ticks_per_beat: np.ndarray, time_division: int,
                             ticks_bars: Sequence[int], ticks_beats: Sequence[int],
                             attribute_controls_indexes: Mapping[int, Sequence[int] | bool] | None = None
                             ) -> list[Event]:
        """REMI's events, each note's Duration followed by its String and technique events (same time, so that
        MidiTok's stable sort by time keeps them there)."""
        events = super()._create_track_events(track, ticks_per_beat, time_division, ticks_bars, ticks_beats,
                                              attribute_controls_indexes)
        out: list[Event] = []
        pitch: Event | None = None
        implied = implied_strings(self)
        for ev in events:
            out.append(ev)
            if ev.type_ == "Pitch":
                pitch = ev
            elif ev.type_ == "Duration" and pitch is not None:
                string, tech = self._string_of(pitch.time, int(pitch.value), int(pitch.desc) - pitch.time)
                if not (implied and string == lowest_fret_string(*self._guitar, int(pitch.value))):
                    out.append(Event("String", string, ev.time, ev.program))
                out += [Event(*t.split("_", 1), ev.time, ev.program) for t in technique_tokens(tech)]
                pitch = None
        return out

    def _string_of(self, time: int, pitch: int, duration: int) -> tuple[int, Technique]:
        """The string and technique of the note at (time, pitch), from the side table (a unison: the one of
        this duration, else the next one); without one (a bare Score, a note quantisation moved onto another's place, or one no string
        of the tuning plays), the string that plays it at the lowest fret."""
        options = self._side.get((time, pitch)) if self._side is not None else None
        if not options:
            return lowest_fret_string(*self._guitar, pitch), PLAIN
        k = next((k for k, o in enumerate(options) if o[0] == duration), 0)
        _, string, tech = options.pop(k) if len(options) > 1 else options[k]
        return string, tech

    # ------------------------------------------------------------ decoding

    def decode(self, tokens: Any, programs: list[tuple[int, bool]] | None = None, output_path: str | None = None,
               tuning: tuple[int, ...] = STANDARD_TUNING, capo: int = 0) -> GuitarScore:
        """Tokens (ids, a TokSequence, BPE or not) -> GuitarScore with each note's string, fret (from pitch,
        string, `tuning` and `capo`; UNPLAYABLE where that string cannot play it, below its open pitch or past
        WRITTEN_FRETS) and techniques. `frets` is
        None when no note fits this tuning (not this tuning's tab: `fingering.fret()` places the notes).
        Special, control and infilling tokens are skipped."""
        if isinstance(tokens, list) and tokens and isinstance(tokens[0], miditok.TokSequence):
            seq = tokens[0]  # one track
        elif isinstance(tokens, miditok.TokSequence):
            seq = tokens
        else:  # ids or token strings, flat or as one track (a list, an array, a tensor)
            flat = tokens.tolist() if hasattr(tokens, "tolist") else list(tokens)
            flat = flat[0] if flat and isinstance(flat[0], list) else flat
            seq = self._convert_sequence_to_tokseq([flat])[0]
        self._preprocess_tokseq_before_decoding(seq)
        score, strings, techs = self._decode_tokens([str(t) for t in seq.tokens], programs)
        notes = score.tracks[0].notes
        strings = resolve_strings(self, [n.pitch for n in notes], strings, tuning, capo)
        frets: list[tuple[int, int]] | None = []
        for note, s in zip(notes, strings):
            f = fret_of(note.pitch, s, tuning, capo)
            frets.append((s, f) if 0 <= f <= WRITTEN_FRETS else UNPLAYABLE)
        if len(frets) != len(notes) or all(f == UNPLAYABLE for f in frets):
            frets = None
        if output_path:
            score.dump_midi(output_path)
        return GuitarScore(score=score, tuning=tuple(tuning), capo=capo, frets=frets,
                           techniques=techs if len(techs) == len(notes) else None, source_format="generated")

    def _decode_tokens(self, toks: list[str], programs: list[tuple[int, bool]] | None = None
                       ) -> tuple[symusic.Score, list[int], list[Technique]]:
        """(score with one track, string per note, technique per note), notes in token order (REMI's)."""
        base = [t for t in toks if t.split("_")[0] not in _NOT_NOTES and not t.startswith(PREFIX)
                and not t.startswith("Fill")]
        score = super().decode([miditok.TokSequence(tokens=base)], programs) if base else \
            symusic.Score(self.time_division)
        if not score.tracks:
            score.tracks.append(symusic.Track(program=0))
        strings, techs = _tab_of(toks, self.config.use_velocities)
        return score, strings, techs


def _side_table(tok: TabREMI, gs: GuitarScore) -> _SideTable:
    """(time, pitch) of every note as the tokenizer sees it (after its own resampling and quantisation) ->
    [(duration, string, technique)]. Each string's notes are preprocessed on their own, so a key is found even where
    quantisation moves notes; two strings sharing a key (a unison) keep both entries, lowest string first."""
    notes = gs.track.notes
    techs = gs.techniques if gs.techniques and len(gs.techniques) == len(notes) else [PLAIN] * len(notes)
    by_string: dict[int, list[int]] = {}
    for i, (s, _f) in enumerate(gs.frets or []):
        by_string.setdefault(s, []).append(i)
    keys: _SideTable = {}
    for s, idx in sorted(by_string.items()):
        if not 1 <= s <= len(gs.tuning):  # UNPLAYABLE: left out, so `_string_of` gives the lowest fret
            continue
        one = symusic.Score(gs.score.ticks_per_quarter)
        one.tempos = gs.score.tempos.copy()
        one.time_signatures = gs.score.time_signatures.copy()
        tr = symusic.Track(program=gs.track.program)
        for i in idx:
            tr.notes.append(notes[i].copy())
        one.tracks.append(tr)
        pre = tok.preprocess_score(one)
        # Preprocessing keeps the notes' order on one string (onsets strictly increase there, apart from notes
        # it merges or drops), so the k-th note of a pitch after it is the k-th of that pitch before it.
        tech_by_pitch: dict[int, list[Technique]] = {}
        for i in sorted(idx, key=lambda i: (notes[i].time, notes[i].pitch)):
            tech_by_pitch.setdefault(notes[i].pitch, []).append(techs[i])
        used: dict[int, int] = {}
        for time, pitch, duration in sorted((n.time, n.pitch, n.duration) for t in pre.tracks for n in t.notes):
            k = used.get(pitch, 0)
            options = tech_by_pitch.get(pitch, [PLAIN])
            keys.setdefault((time, pitch), []).append((duration, s, options[min(k, len(options) - 1)]))
            used[pitch] = k + 1
    return keys


def lowest_fret_string(tuning: tuple[int, ...], capo: int, pitch: int) -> int:
    """The string that plays `pitch` at the lowest fret in this tuning (the lowest string when none can)."""
    n = len(tuning)
    frets = [(f, s) for s in range(1, n + 1) if (f := fret_of(pitch, s, tuning, capo)) >= 0]
    return min(frets)[1] if frets else min(n, MAX_STRINGS)


def _tab_of(toks: list[str], velocities: bool) -> tuple[list[int], list[Technique]]:
    """The string (0: none written) and technique of each whole note of REMI tokens with tab tokens."""
    strings: list[int] = []
    techs: list[Technique] = []
    pending: list[str] | None = None
    for j, t in enumerate(toks):
        kind = t.split("_")[0]
        if closes_note(toks, j, velocities):
            if pending is not None:
                techs.append(technique_of(pending))
            strings.append(0)
            pending = []
        elif kind == "String" and pending is not None and strings and strings[-1] == 0:
            strings[-1] = int(t.split("_")[1])
        elif kind in ("Bend", "Tech") and pending is not None:
            pending.append(t)
        elif kind in ("Pitch", "Position", "Bar", "TimeSig", "Tempo") and pending is not None:
            techs.append(technique_of(pending))
            pending = None
    if pending is not None:
        techs.append(technique_of(pending))
    return strings, techs


def closes_note(toks: Sequence[str], j: int, velocities: bool) -> bool:
    """Token j is the Duration of a whole note (Pitch [Velocity] Duration), as REMI decoding reads one."""
    if not toks[j].startswith("Duration_"):
        return False
    if velocities:
        return j >= 2 and toks[j - 2].startswith("Pitch_") and toks[j - 1].startswith("Velocity_")
    return j >= 1 and toks[j - 1].startswith("Pitch_")


def note_offset(tok: miditok.MusicTokenizer) -> int:
    """How many tokens a note's String comes after its Pitch (3 with Velocity, 2 without)."""
    return 3 if tok.config.use_velocities else 2


def decode_tab(tok: TabREMI, ids: Sequence[int], guitar: tuple[tuple[int, ...], int] | None = None
               ) -> tuple[symusic.Score, list[int], list[Technique]]:
    """(score, string per note, technique per note) from base tab token ids, notes in token order (REMI's): for
    callers that need the strings as written, playable in some tuning or not. A note without a String token has
    0, or with `guitar` (tuning, capo) the string that layout implies (`resolve_strings`)."""
    score, strings, techs = tok._decode_tokens([tok[int(i)] for i in ids])
    if guitar is not None:
        notes = score.tracks[0].notes if score.tracks else []
        strings = resolve_strings(tok, [n.pitch for n in notes], strings, *guitar)
    return score, strings, techs


def tab_layout_of(tok: miditok.MusicTokenizer, default: int = LAYOUT) -> int:
    """The tab layout a tokenizer writes (its tokenizer.json's ``tab_layout``); `default` for other tokenizers."""
    if not isinstance(tok, TabREMI):
        return default
    return int((getattr(tok.config, "additional_params", None) or {}).get(LAYOUT_PARAM, LAYOUT))


def implied_strings(tok: miditok.MusicTokenizer) -> bool:
    """Layout 3 or later: a note on its lowest-fret string has no String token (module docstring)."""
    return isinstance(tok, TabREMI) and tab_layout_of(tok) >= 3


def resolve_strings(tok: miditok.MusicTokenizer, pitches: Sequence[int], strings: Sequence[int],
                    tuning: tuple[int, ...], capo: int = 0) -> list[int]:
    """Each note's string: the one its String token wrote, else (0) the string its layout implies: the lowest-fret
    string of its pitch in this tuning and capo for layout 3, none (0) for layout 2, which writes every string."""
    if not implied_strings(tok):
        return list(strings)
    return [s or lowest_fret_string(tuning, capo, p) for p, s in zip(pitches, strings)] + list(strings[len(pitches):])


def check_layout(params: Mapping[str, Any], tokenization: str, where: str) -> None:
    """Refuse a TabREMI tokenizer.json of a layout this version does not read (the first: `params`: its config),
    with the fix. Layouts 2 and 3 are both read (a run of either samples, fingers and fills as it was trained)."""
    extra = params.get("additional_params") or {}
    if tokenization == "TabREMI" and extra.get(LAYOUT_PARAM) not in LAYOUTS_READ:
        raise GuitarformerError(f"{where} holds tab tokens of an older layout (a Velocity on every note)",
                                "run `guitarformer prepare` again (and train on the new dataset)")


def control_params(styles: list[str] | tuple[str, ...], added: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The TokenizerConfig parameter that turns controls on, with this style vocabulary (cleaned, sorted) and the
    styles `added` after the whole vocabulary (a fine-tuning dataset's new ones, in the order given)."""
    on: dict[str, Any] = {"styles": sorted({style_name(s) for s in styles})}
    if added:
        on[ADDED_STYLES] = [style_name(s) for s in added]
    return {CONTROLS_PARAM: on}


def _style_lists(tok: miditok.MusicTokenizer) -> tuple[list[str], list[str]]:
    """(the styles numbered with the other controls, the styles appended after the whole vocabulary)."""
    on = (getattr(tok.config, "additional_params", None) or {}).get(CONTROLS_PARAM) or {}
    return list(on.get("styles", [])), list(on.get(ADDED_STYLES, []))


def control_styles(tok: miditok.MusicTokenizer) -> list[str] | None:
    """The style vocabulary of a tokenizer with controls (appended styles last); None when controls are off."""
    if not has_controls(tok):
        return None
    base, added = _style_lists(tok)
    return base + added


def has_controls(tok: miditok.MusicTokenizer) -> bool:
    params = getattr(tok.config, "additional_params", None) or {}
    return isinstance(tok, TabREMI) and isinstance(params.get(CONTROLS_PARAM), dict)


def is_tab_tokenizer(tok: miditok.MusicTokenizer) -> bool:
    return isinstance(tok, TabREMI)


# ---------------------------------------------------------------- control tokens


def bar_notes(tok: TabREMI, ids: list[int], tuning: tuple[int, ...], capo: int = 0
              ) -> tuple[list[list[PlayedNote]], list[int], int]:
    """The notes of tab token ids grouped by the Bar tokens they follow, with each bar's length in ticks (from
    the TimeSig in force) and the ticks per quarter of those times. Frets come from string, pitch and tuning
    (-1 where the string cannot play the note). Notes before the first Bar (none in REMI) join the first bar."""
    toks = [tok[int(i)] for i in ids]
    content = [int(i) for i, t in zip(ids, toks) if t.split("_")[0] not in ("BOS", "EOS", "PAD", "MASK")]
    score, strings, techs = decode_tab(tok, content, (tuning, capo))
    tpq = score.ticks_per_quarter
    notes = list(score.tracks[0].notes) if score.tracks else []
    sig = (4, 4) if not score.time_signatures else (score.time_signatures[0].numerator,
                                                    score.time_signatures[0].denominator)
    bars: list[list[PlayedNote]] = [[]]  # bars[0] is open before the first Bar token, and is that bar's
    lengths = [sig[0] * tpq * 4 // sig[1]]
    seen_bar, k = False, 0
    for j, t in enumerate(toks):
        if t == "Bar_None":
            if seen_bar:
                bars.append([])
                lengths.append(lengths[-1])
            seen_bar = True
        elif t.startswith("TimeSig_"):
            num, den = (int(x) for x in t.split("_")[1].split("/"))
            lengths[-1] = num * tpq * 4 // den
        elif closes_note(toks, j, tok.config.use_velocities) and k < len(notes):
            n, s = notes[k], strings[k] if k < len(strings) else 0
            f = fret_of(n.pitch, s, tuning, capo)
            tech = techs[k] if k < len(techs) else PLAIN
            bars[-1].append(PlayedNote(n.time, n.duration, n.pitch, s, f if 0 <= f <= WRITTEN_FRETS else -1, tech))
            k += 1
    return bars, lengths, tpq


def insert_controls(tok: TabREMI, ids: list[int], gs: GuitarScore, style: str | None = None,
                    key: str | None = None) -> list[int]:
    """`ids` (base tab token ids of `gs`, as `encode` gives them, BOS and EOS optional) with the piece controls
    after BOS (or at the start) and each bar's controls after its Bar token, all computed from the notes the
    ids decode to, so that they describe what the model sees. `style` None: no style token. `key`: the piece's
    written key (else estimated from the notes)."""
    styles = control_styles(tok)
    if styles is None:
        raise GuitarformerError("this tokenizer has no control tokens", "build TabREMI with control_params(styles)")
    if tok.is_trained:
        raise GuitarformerError("control tokens go into base ids, before BPE", "insert them before training BPE "
                                "and keep BPE off (bpe_vocab_size 0) for a dataset with controls")
    if style is not None and style_name(style) not in styles:
        raise GuitarformerError(f"style {style!r} is not in this tokenizer's styles",
                                f"use one of: {', '.join(styles) or '(none)'}")
    bars, lengths, tpq = bar_notes(tok, ids, gs.tuning, gs.capo)
    piece = piece_controls([n for b in bars for n in b], gs.tuning, gs.capo, style, key)
    head = [tok.vocab[control_token(name, piece[name])] for name in control_names(PIECE)
            if name in piece and control_token(name, piece[name]) in tok.vocab]
    per_bar = [bar_controls(b, tpq, n) for b, n in zip(bars, lengths)]
    out: list[int] = []
    bar = -1
    at = 1 if ids and int(ids[0]) == tok["BOS_None"] else 0
    for j, i in enumerate(ids):
        if j == at:
            out += head
        out.append(int(i))
        if tok[int(i)] == "Bar_None":
            bar += 1
            values = per_bar[bar] if bar < len(per_bar) else {}
            out += [tok.vocab[control_token(n, values[n])] for n in control_names(BAR) if n in values]
    if at >= len(ids):
        out += head
    return out


def strip_controls(tok: miditok.MusicTokenizer, ids: list[int]) -> list[int]:
    """The ids without control tokens."""
    return [int(i) for i in ids if not tok[int(i)].startswith(PREFIX)]
