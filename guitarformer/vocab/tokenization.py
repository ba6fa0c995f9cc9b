"""miditok tokenizers: build from config, encode a GuitarScore to ids (BOS ... EOS), decode ids leniently.

This module is the one place that touches miditok's private attributes (the tick tables the sampler's time
state needs, the BPE model prepare trains): everything else calls the functions below. tests/data/test_tokenization.py
fails loudly if a miditok upgrade changes them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import miditok
import symusic

from guitarformer.vocab.controls import style_name
from guitarformer.vocab.infill import infill_params
from guitarformer.errors import GuitarformerError
from guitarformer.vocab.parts import BAND_PARAM, band_params, band_roles
from guitarformer.vocab.tab_tokens import (
    ADDED_STYLES,
    CONTROLS_PARAM,
    TabREMI,
    check_layout,
    control_params,
    control_styles,
    is_tab_tokenizer,
    tab_params,
    LAYOUT,
)
from guitarformer.music.guitar import TOKEN_PITCH_RANGE
from guitarformer.music.score import GuitarScore

if TYPE_CHECKING:
    from guitarformer.config import DataConfig

TOKENIZERS = {
    "TabREMI": TabREMI,  # REMI + each note's string and techniques, Velocity only with dynamics (tab_tokens.py)
    "REMI": miditok.REMI,
    "TSD": miditok.TSD,
    "MIDILike": miditok.MIDILike,
    "Structured": miditok.Structured,
}
TIME_SIGNATURES = {2: [2, 3], 4: [1, 2, 3, 4, 5, 6, 7], 8: [3, 5, 6, 7, 9, 12]}


def tokenizer_params(cfg: "DataConfig", styles: list[str] | tuple[str, ...] = (), dynamics: bool = False
                     ) -> dict[str, Any]:
    """The miditok TokenizerConfig arguments for a data config (stored in meta.json); with `cfg.controls`, the
    control tokens' parameter too, with this style vocabulary (the dataset's folder names). Tab tokens carry a
    Velocity per note only with `dynamics` (the dataset's notes have more than one velocity) or the data config's
    `tab_velocities`."""
    params = dict(
        pitch_range=TOKEN_PITCH_RANGE,
        num_velocities=cfg.num_velocities,
        use_tempos=cfg.use_tempos,
        use_time_signatures=cfg.use_time_signatures and cfg.tokenizer in ("REMI", "TabREMI", "TSD", "MIDILike"),
        time_signature_range=TIME_SIGNATURES,
        use_programs=False,
        special_tokens=["PAD", "BOS", "EOS", "MASK"],
    )
    if getattr(cfg, "controls", False):
        params.update(control_params(styles))
    if cfg.tokenizer == "TabREMI":  # Velocity only with dynamics; the bar-infilling tokens, appended last
        params.update(tab_params(dynamics or bool(getattr(cfg, "tab_velocities", False)),
                                 int(getattr(cfg, "tab_layout", LAYOUT))))
        params.update(infill_params())
        if getattr(cfg, "parts", ""):
            params.update(band_params([r.strip() for r in cfg.parts.split(",") if r.strip()]))
    return params


def build_tokenizer(cfg: "DataConfig", styles: list[str] | tuple[str, ...] = (), dynamics: bool = False
                    ) -> miditok.MusicTokenizer:
    return TOKENIZERS[cfg.tokenizer](miditok.TokenizerConfig(**tokenizer_params(cfg, styles, dynamics)))


def load_tokenizer(path: str | Path) -> miditok.MusicTokenizer:
    """Load tokenizer.json whatever its class (the file records it); tab tokens of an older layout are refused
    with the fix (prepare again)."""

    data = json.loads(Path(path).read_text())
    name = data.get("tokenization", "REMI")
    check_layout(data.get("config") or {}, name, str(path))
    cls = TOKENIZERS.get(name) or getattr(miditok, name)
    return cls(params=Path(path))


# ---------------------------------------------------------------- one run's tokens, extended for another's data


def extended_tokenizer(base: miditok.MusicTokenizer, styles: list[str] | tuple[str, ...] = ()
                       ) -> miditok.MusicTokenizer:
    """`base` (an init run's tokenizer) with the `styles` it lacks appended after its whole vocabulary, so that
    every id of `base` names the same token: a dataset tokenized with it fine-tunes `base`'s model, whose
    embedding only grows. Styles need a tokenizer with controls (without, a dataset's styles are not tokens at
    all and `base` is returned as it is); a BPE tokenizer's merges belong to the data it was trained on."""
    if base.is_trained:
        raise ValueError("a BPE-trained tokenizer is not extended")
    known = control_styles(base)
    if known is None:
        return base
    new = [s for s in sorted({style_name(s) for s in styles}) if s not in known]
    if not new:
        return base
    config = copy.deepcopy(base.config)
    on = config.additional_params[CONTROLS_PARAM]
    on[ADDED_STYLES] = [*on.get(ADDED_STYLES, []), *new]
    return type(base)(config)


def band_tokenizer(base: miditok.MusicTokenizer, roles: list[str] | tuple[str, ...]) -> miditok.MusicTokenizer:
    """`base` (a single-part run's tokenizer) with the band's part and drum tokens (data/parts.py) after its whole
    vocabulary: every id of `base` names the same token, so its model learns the band with its embedding grown."""
    if band_roles(base):
        if band_roles(base) != band_params(roles)[BAND_PARAM]:
            raise GuitarformerError(f"this run's band is {', '.join(band_roles(base))}",
                                    "prepare with the same --set data.parts")
        return base
    if not is_tab_tokenizer(base) or base.is_trained:
        raise GuitarformerError("a band stream needs tab tokens without BPE", "fine-tune a TabREMI run (the shipped "
                                "model is one) or prepare with --set data.tokenizer=TabREMI")
    config = copy.deepcopy(base.config)
    config.additional_params.update(band_params(roles))
    return type(base)(config)


# What a mismatch between two tokenizers' configs means, for the few settings users change.
_SETTING_NAMES = {"beat_res": "beat resolution", "pitch_range": "pitch range", "use_velocities": "velocities",
                  "use_tempos": "tempo tokens", "use_time_signatures": "time signatures", "num_velocities":
                  "velocity bins", "use_programs": "program tokens", "use_rests": "rests", "use_chords": "chords"}


def tokens_differ(init: miditok.MusicTokenizer, data: miditok.MusicTokenizer) -> str | None:
    """None where `data`'s vocabulary extends `init`'s (same class and settings, every token of `init` at the
    same id, new tokens only after them); else what differs, in a few words."""
    if type(init) is not type(data):
        return f"tokenizer {type(data).__name__}, the init run's {type(init).__name__}"
    if init.is_trained or data.is_trained:
        which = "the dataset's" if data.is_trained else "the init run's"
        return f"{which} tokens are BPE-merged (merges learned from one dataset do not carry to another)"
    a, b = (json.loads(json.dumps(t.config.to_dict(serialize=True), default=str)) for t in (init, data))
    extra_a, extra_b = a.pop("additional_params", {}) or {}, b.pop("additional_params", {}) or {}
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return f"{_SETTING_NAMES.get(key, key)} {b.get(key)}, the init run's {a.get(key)}"
    if BAND_PARAM in extra_b and BAND_PARAM not in extra_a:  # the band's tokens come after all of init's
        extra_b.pop(BAND_PARAM)
    for key in sorted((set(extra_a) | set(extra_b)) - {CONTROLS_PARAM}):
        if extra_a.get(key) != extra_b.get(key):
            return f"{key} {extra_b.get(key)}, the init run's {extra_a.get(key)}"
    if (CONTROLS_PARAM in extra_a) != (CONTROLS_PARAM in extra_b):
        return "control tokens " + ("on, the init run's off" if CONTROLS_PARAM in extra_b else "off, the init run's on")
    moved = [t for t, i in init.vocab.items() if data.vocab.get(t) != i]
    if moved:
        return (f"styles {control_styles(data)}, the init run's {control_styles(init)} ({len(moved)} of "
                "its tokens missing or at other ids)")
    return None


def special_ids(tok: miditok.MusicTokenizer) -> dict[str, int]:
    return {"pad": tok.pad_token_id, "bos": tok["BOS_None"], "eos": tok["EOS_None"]}


def bar_ids(tok: miditok.MusicTokenizer) -> list[int]:
    """Ids of the tokens that open a bar (empty for tokenizations without Bar tokens, e.g. TSD)."""
    return list(tok.token_ids_of_type("Bar"))


def encode(tok: miditok.MusicTokenizer, gs: "GuitarScore | symusic.Score", bos_eos: bool = True) -> list[int]:
    """Token ids of one guitar part, BOS ... EOS (BPE applied when the tokenizer is trained).

    A tab tokenizer (TabREMI) needs a GuitarScore with `frets` (the source's, or `fingering.fret()`'s)."""
    tab = is_tab_tokenizer(tok)
    if tab and not isinstance(gs, GuitarScore):
        raise TypeError("a tab tokenizer encodes a GuitarScore with frets, not a bare symusic Score")
    seq = tok.encode(gs if tab else (gs if isinstance(gs, symusic.Score) else gs.score))
    if isinstance(seq, list):  # one TokSequence per track; a GuitarScore holds one track
        seq = seq[0] if seq else None
    ids = list(seq.ids) if seq is not None else []
    if bos_eos:
        sp = special_ids(tok)
        ids = [sp["bos"], *ids, sp["eos"]]
    return ids


def decode(tok: miditok.MusicTokenizer, ids: list[int], program: int = 25, tempo: float | None = None) -> symusic.Score:
    """Ids -> symusic Score with one track. Special tokens are dropped; miditok skips ill-ordered tokens."""
    clean = _content_ids(tok, ids)
    if not clean:
        score = symusic.Score(tok.time_division)
    else:  # a tab tokenizer decodes to a GuitarScore (strings and techniques): here only its notes are asked for
        score = tok.decode(clean).score if is_tab_tokenizer(tok) else tok.decode([clean])
    return _as_part(score, program, tempo)


def _content_ids(tok: miditok.MusicTokenizer, ids: list[int]) -> list[int]:
    """The ids without special tokens (PAD, BOS, EOS, MASK) or out-of-vocabulary values."""
    sp = special_ids(tok)
    drop = {sp["pad"], sp["bos"], sp["eos"], tok["MASK_None"]}
    return [int(i) for i in ids if int(i) not in drop and 0 <= int(i) < len(tok)]


def _as_part(score: symusic.Score, program: int, tempo: float | None) -> symusic.Score:
    """A decoded score as one guitar part: at least one track, each on `program`, and `tempo` if given."""
    if not score.tracks:
        score.tracks.append(symusic.Track(program=program))
    for tr in score.tracks:
        tr.program = program
        tr.is_drum = False
    if tempo is not None:
        score.tempos = [symusic.Tempo(0, float(tempo))]
    return score


def decode_guitar(tok: miditok.MusicTokenizer, ids: list[int], tuning: tuple[int, ...], capo: int = 0,
                  program: int = 25, tempo: float | None = None, name: str = "") -> GuitarScore:
    """Ids -> GuitarScore. With a tab tokenizer the part keeps the strings and techniques the tokens carry
    (`TabREMI.decode`: frets from pitch, string and tuning; a note its string cannot play in this tuning is
    UNPLAYABLE, and `frets` is None when no note fits, for `fingering.fret()` to place); otherwise only pitches
    (frets None)."""
    if not is_tab_tokenizer(tok):
        return GuitarScore(score=decode(tok, ids, program, tempo), tuning=tuple(tuning), capo=capo, name=name,
                           source_format="generated")
    clean = _content_ids(tok, ids)
    gs = tok.decode(clean, tuning=tuple(tuning), capo=capo)
    _as_part(gs.score, program, tempo)
    gs.name = name
    return gs


# ---------------------------------------------------------------- miditok internals, wrapped


def ticks_per_beat(tok: miditok.MusicTokenizer) -> dict[int, int]:
    """Ticks per beat the tokenizer uses for each time-signature denominator (e.g. {2: 32, 4: 16, 8: 8})."""
    return dict(tok._tpb_per_ts)


def duration_ticks(tok: miditok.MusicTokenizer, tpb: int) -> dict[str, int]:
    """Ticks of each Duration/TimeShift token value ("1.0.8") at `tpb` ticks per beat."""
    return dict(tok._tpb_tokens_to_ticks[tpb])


def ids_to_bpe_text(tok: miditok.MusicTokenizer, ids: list[int]) -> str:
    """The base ids as the one-character-per-token string miditok's BPE model works on."""
    return tok._ids_to_bytes(ids, as_one_str=True)


def bpe_encode_pretokenized(tok: miditok.MusicTokenizer, pieces: list[list[str]]) -> list[list[int]]:
    """BPE ids of each sequence given as pieces (bars) of `ids_to_bpe_text` strings, with a trained tokenizer."""
    return [list(e.ids) for e in tok._model.encode_batch(pieces, is_pretokenized=True)]
