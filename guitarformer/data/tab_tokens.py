"""Tab-native tokens: REMI whose every note also carries its string and its playing techniques.

A note is ``Pitch Velocity Duration String [Bend] [Tech ...]``: MidiTok's REMI reads Velocity and Duration at
fixed offsets after Pitch and skips token types it does not know, so String and technique tokens go after
Duration, where REMI decoding leaves them alone; `decode_tab` reads them back in its own pass. The fret follows
from pitch, string and tuning (fret = pitch - open string - capo), so one String token per note carries the
whole fingering, and the pitch stays explicit for everything that reads pitches (features, MIDI, the n-gram).

Techniques are the per-note `Technique` record as tokens, in a fixed order: ``Bend_<quarter tones>`` (the
bend's peak, 1-8) with ``Tech_Release`` when it comes back down, then ``Tech_*`` for slides (SlideInBelow,
SlideInAbove, SlideShift, SlideLegato, SlideOutDown, SlideOutUp), Hammer, PalmMute, Dead, Ghost, harmonics
(HarmNatural, HarmArtificial, HarmPinch, HarmTap, HarmSemi, HarmFeedback), Vibrato, LetRing, Tap. A bend comes back as
its shape's summary (peak at mid-note, release to the fretted pitch at the end), which is what tab writes.

Everything else is MidiTok's REMI: tokenizer.json save/load, BPE, `tokens_types_graph` (extended here with the
new types, so the sampler's grammar and `tokens_errors` cover them).

With controls on (the tokenizer config's ``guitar_controls`` parameter, off by default), the vocabulary also holds
the control tokens of data/controls.py: piece controls (``CtrlTuning CtrlCapo CtrlKey CtrlStyle``) right after BOS,
bar controls (``CtrlDensity CtrlPoly CtrlPos CtrlPM CtrlTech``) right after each Bar, each optional, always in that
order. `insert_controls` writes them into a piece's ids from its own decoded notes; `strip_controls` takes them out.
The style vocabulary depends on the dataset, so it is kept in that same parameter, which tokenizer.json saves.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import miditok
import symusic

from guitarformer.data.controls import (
    BAR_CONTROLS,
    PIECE_CONTROLS,
    PREFIX,
    PlayedNote,
    bar_controls,
    control_token,
    control_type,
    control_vocabulary,
    piece_controls,
    style_name,
)
from guitarformer.data.infill import FILL_TOKENS, extend_graph, infill_on
from guitarformer.errors import GuitarformerError
from guitarformer.music.guitar import MAX_FRET
from guitarformer.music.score import PLAIN, GuitarScore, Technique

MAX_STRINGS = 8
MAX_BEND_QUARTER_TONES = 8  # two whole steps: the most a guitar string bends
CONTROLS_PARAM = "guitar_controls"  # TokenizerConfig parameter: {"styles": [...]} turns controls on

# Flag fields of Technique and their Tech_ values, in token order.
_FLAGS = (("hammer", "Hammer"), ("palm_mute", "PalmMute"), ("dead", "Dead"), ("ghost", "Ghost"),
          ("vibrato", "Vibrato"), ("let_ring", "LetRing"), ("tap", "Tap"))
_SLIDE_IN = {"below": "SlideInBelow", "above": "SlideInAbove"}
_SLIDE_OUT = {"shift": "SlideShift", "legato": "SlideLegato", "down": "SlideOutDown", "up": "SlideOutUp"}
_HARMONIC = {"natural": "HarmNatural", "artificial": "HarmArtificial", "pinch": "HarmPinch", "tap": "HarmTap",
             "semi": "HarmSemi", "feedback": "HarmFeedback"}
TECH_VALUES = ("Release", *_SLIDE_IN.values(), *_SLIDE_OUT.values(), *(v for _, v in _FLAGS), *_HARMONIC.values())
_FROM_TECH = {v: ("slide_in", k) for k, v in _SLIDE_IN.items()} | {v: ("slide_out", k) for k, v in _SLIDE_OUT.items()} \
    | {v: ("harmonic", k) for k, v in _HARMONIC.items()} | {v: (f, True) for f, v in _FLAGS}


class TabREMI(miditok.REMI):
    """REMI with ``String_<1..8>`` after each note's Duration and technique tokens after it (module docstring)."""

    def _create_base_vocabulary(self) -> list[str]:
        vocab = super()._create_base_vocabulary()
        vocab += [f"String_{s}" for s in range(1, MAX_STRINGS + 1)]
        vocab += [f"Bend_{q}" for q in range(1, MAX_BEND_QUARTER_TONES + 1)]
        vocab += [f"Tech_{v}" for v in TECH_VALUES]
        if infill_on(self):  # bar infilling (data/infill.py): after the tab tokens, so that none of theirs moves
            vocab += list(FILL_TOKENS)
        styles = control_styles(self)
        if styles is not None:
            vocab += control_vocabulary(styles)
        return vocab

    def _create_token_types_graph(self) -> dict[str, set[str]]:
        graph = super()._create_token_types_graph()
        after_note = set(graph["Duration"])  # what may follow a whole note in REMI
        graph["Duration"] = {"String"}
        graph["String"] = after_note | {"Bend", "Tech"}
        graph["Bend"] = after_note | {"Tech"}
        graph["Tech"] = after_note | {"Tech"}
        if control_styles(self) is not None:
            # Each control may be left out, so each one leads to any later one of its group or past the group.
            piece = [control_type(n) for n in PIECE_CONTROLS]
            for k, t in enumerate(piece):  # reached only from BOS (miditok lets BOS lead to any type)
                graph[t] = set(piece[k + 1:]) | {"Bar"}
            bar = [control_type(n) for n in BAR_CONTROLS]
            after_bar = set(graph["Bar"])
            for k, t in enumerate(bar):
                graph[t] = set(bar[k + 1:]) | after_bar
            graph["Bar"] = after_bar | set(bar)
        return extend_graph(graph) if infill_on(self) else graph


def control_params(styles: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The TokenizerConfig parameter that turns controls on, with this style vocabulary (cleaned, sorted)."""
    return {CONTROLS_PARAM: {"styles": sorted({style_name(s) for s in styles})}}


def control_styles(tok: miditok.MusicTokenizer) -> list[str] | None:
    """The style vocabulary of a tokenizer with controls; None when controls are off."""
    params = getattr(tok.config, "additional_params", None) or {}
    on = params.get(CONTROLS_PARAM)
    return list(on.get("styles", [])) if isinstance(tok, TabREMI) and isinstance(on, dict) else None


def has_controls(tok: miditok.MusicTokenizer) -> bool:
    return control_styles(tok) is not None


def is_tab_tokenizer(tok: miditok.MusicTokenizer) -> bool:
    return isinstance(tok, TabREMI)


def technique_tokens(t: Technique) -> list[str]:
    """The tokens of one note's techniques, in the fixed order (none for a plain note)."""
    if not t:
        return []
    out = []
    if t.bend:
        peak = max(a for _, a in t.bend)
        if peak > 0:
            out.append(f"Bend_{min(MAX_BEND_QUARTER_TONES, max(1, round(peak)))}")
            if t.release:
                out.append("Tech_Release")
    if t.slide_in in _SLIDE_IN:
        out.append(f"Tech_{_SLIDE_IN[t.slide_in]}")
    if t.slide_out in _SLIDE_OUT:
        out.append(f"Tech_{_SLIDE_OUT[t.slide_out]}")
    out += [f"Tech_{v}" for f, v in _FLAGS if getattr(t, f)]
    if t.harmonic in _HARMONIC:
        out.append(f"Tech_{_HARMONIC[t.harmonic]}")
    return out


def technique_of(tokens: list[str]) -> Technique:
    """The Technique a note's technique tokens describe (inverse of `technique_tokens` up to the bend's shape)."""
    fields: dict[str, Any] = {}
    peak, release = 0, False
    for token in tokens:
        kind, value = token.split("_", 1)
        if kind == "Bend":
            peak = int(value)
        elif value == "Release":
            release = True
        elif value in _FROM_TECH:
            name, v = _FROM_TECH[value]
            fields[name] = v
    if peak:
        fields["bend"] = ((0.0, 0.0), (0.5, float(peak)), (1.0, 0.0)) if release else ((0.0, 0.0), (0.5, float(peak)))
    return replace(PLAIN, **fields) if fields else PLAIN


def canonical(t: Technique) -> Technique:
    """A Technique as the tokens can hold it (bend shape summarised): what a round trip must give back."""
    return technique_of(technique_tokens(t))


def _note_keys(tok: miditok.MusicTokenizer, gs: GuitarScore) -> tuple[dict[tuple[int, int], list[tuple[int, Technique]]], int]:
    """(time, pitch) of every note as the tokenizer sees it (after its own resampling and quantisation),
    -> [(string, technique)]. Each string's notes are preprocessed on their own, so a key is found even
    where quantisation moves notes; two strings sharing a key (a unison) keep both entries. Also returns the
    ticks per quarter of those times."""
    notes = gs.track.notes
    techs = gs.techniques if gs.techniques and len(gs.techniques) == len(notes) else [PLAIN] * len(notes)
    by_string: dict[int, list[int]] = {}
    for i, (s, _f) in enumerate(gs.frets or []):
        by_string.setdefault(s, []).append(i)
    keys: dict[tuple[int, int], list[tuple[int, Technique]]] = {}
    tpq = 0
    for s, idx in sorted(by_string.items()):
        one = symusic.Score(gs.score.ticks_per_quarter)
        one.tempos = gs.score.tempos.copy()
        one.time_signatures = gs.score.time_signatures.copy()
        tr = symusic.Track(program=gs.track.program)
        for i in idx:
            tr.notes.append(notes[i].copy())
        one.tracks.append(tr)
        pre = tok.preprocess_score(one)
        tpq = pre.ticks_per_quarter
        # Preprocessing keeps the notes' order per string (onsets strictly increase on one string, apart from
        # notes it merges or drops), so match by (time, pitch) and carry the technique of the same note.
        src = sorted(idx, key=lambda i: (notes[i].time, notes[i].pitch))
        got = sorted(((n.time, n.pitch) for tr2 in pre.tracks for n in tr2.notes))
        tech_by_pitch: dict[int, list[Technique]] = {}
        for i in src:
            tech_by_pitch.setdefault(notes[i].pitch, []).append(techs[i])
        used: dict[int, int] = {}
        for time, pitch in got:
            k = used.get(pitch, 0)
            options = tech_by_pitch.get(pitch, [PLAIN])
            keys.setdefault((time, pitch), []).append((s, options[min(k, len(options) - 1)]))
            used[pitch] = k + 1
    return keys, tpq


def encode_tab(tok: TabREMI, gs: GuitarScore, base_ids: list[int]) -> list[int]:
    """Insert each note's String and technique tokens into the REMI ids of `gs` (BOS ... EOS as given).

    `gs.frets` must be set (a reader's human fingering, or `fret()`'s). A note the tokenizer's quantisation
    moved onto another note's (time, pitch) takes the lowest fret the tuning allows for it."""
    if gs.frets is None:
        raise ValueError("tab tokens need a fingering: call fretting.fret() first for sources without one")
    keys, key_tpq = _note_keys(tok, gs)
    decoded = tok.decode([[i for i in base_ids if tok[i].split("_")[0] not in ("BOS", "EOS", "PAD")]])
    dnotes = list(decoded.tracks[0].notes) if decoded.tracks else []
    per_key_tick = (key_tpq or decoded.ticks_per_quarter) / decoded.ticks_per_quarter
    out: list[int] = []
    k = 0
    toks = [tok[i] for i in base_ids]
    for j, i in enumerate(base_ids):
        out.append(i)
        if _closes_note(toks, j) and k < len(dnotes):
            n = dnotes[k]
            k += 1
            cands = keys.get((round(n.time * per_key_tick), n.pitch)) or [(0, PLAIN)]
            string, tech = cands.pop(0) if len(cands) > 1 else cands[0]
            if not 1 <= string <= min(MAX_STRINGS, len(gs.tuning)):  # unplayable or unknown: the nearest string
                string = _lowest_fret_string(gs, n.pitch)
            out.append(tok[f"String_{string}"])
            out += [tok[t] for t in technique_tokens(tech)]
    return out


def _closes_note(toks: list[str], j: int) -> bool:
    """Token j is the Duration of a whole note (Pitch Velocity Duration), as REMI decoding reads one."""
    return (toks[j].startswith("Duration_") and j >= 2 and toks[j - 2].startswith("Pitch_")
            and toks[j - 1].startswith("Velocity_"))


def _lowest_fret_string(gs: GuitarScore, pitch: int) -> int:
    n = len(gs.tuning)
    frets = [(pitch - open_ - gs.capo, n - k) for k, open_ in enumerate(gs.tuning) if pitch - open_ - gs.capo >= 0]
    return min(frets)[1] if frets else n


def decode_tab(tok: TabREMI, ids: list[int]) -> tuple[symusic.Score, list[int], list[Technique]]:
    """(score, string per note, technique per note) from tab token ids, notes in token order (REMI's)."""
    toks = [tok[int(i)] for i in ids]
    base = [int(i) for i, t in zip(ids, toks) if t.split("_")[0] not in ("String", "Bend", "Tech", "BOS", "EOS", "PAD", "MASK")
            and not t.startswith(PREFIX)]
    score = tok.decode([base]) if base else symusic.Score(tok.time_division)
    strings: list[int] = []
    techs: list[Technique] = []
    pending: list[str] | None = None
    for j, t in enumerate(toks):
        kind = t.split("_")[0]
        if _closes_note(toks, j):
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
    return score, strings, techs


# ---------------------------------------------------------------- control tokens


def bar_notes(tok: TabREMI, ids: list[int], tuning: tuple[int, ...], capo: int = 0
              ) -> tuple[list[list[PlayedNote]], list[int], int]:
    """The notes of tab token ids grouped by the Bar tokens they follow, with each bar's length in ticks (from
    the TimeSig in force) and the ticks per quarter of those times. Frets come from string, pitch and tuning
    (-1 where the string cannot play the note). Notes before the first Bar (none in REMI) join the first bar."""
    toks = [tok[int(i)] for i in ids]
    content = [int(i) for i, t in zip(ids, toks) if t.split("_")[0] not in ("BOS", "EOS", "PAD", "MASK")]
    score, strings, techs = decode_tab(tok, content)
    tpq = score.ticks_per_quarter
    notes = list(score.tracks[0].notes) if score.tracks else []
    n_strings = len(tuning)
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
        elif _closes_note(toks, j) and k < len(notes):
            n, s = notes[k], strings[k] if k < len(strings) else 0
            f = n.pitch - tuning[n_strings - s] - capo if 1 <= s <= n_strings else -1
            tech = techs[k] if k < len(techs) else PLAIN
            bars[-1].append(PlayedNote(n.time, n.duration, n.pitch, s, f if 0 <= f <= MAX_FRET else -1, tech))
            k += 1
    return bars, lengths, tpq


def insert_controls(tok: TabREMI, ids: list[int], gs: GuitarScore, style: str | None = None) -> list[int]:
    """`ids` (base tab token ids of `gs`, as `encode` gives them, BOS and EOS optional) with the piece controls
    after BOS (or at the start) and each bar's controls after its Bar token, all computed from the notes the
    ids decode to, so that they describe what the model sees. `style` None: no style token."""
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
    piece = piece_controls([n for b in bars for n in b], gs.tuning, gs.capo, style)
    head = [tok.vocab[control_token(name, piece[name])] for name in PIECE_CONTROLS
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
            out += [tok.vocab[control_token(n, values[n])] for n in BAR_CONTROLS if n in values]
    if at >= len(ids):
        out += head
    return out


def strip_controls(tok: miditok.MusicTokenizer, ids: list[int]) -> list[int]:
    """The ids without control tokens."""
    return [int(i) for i in ids if not tok[int(i)].startswith(PREFIX)]
