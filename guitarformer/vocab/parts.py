"""The band's tokens: a part token for each part a song's stream carries, and one token per drum hit.

A tokenizer built with the ``band_parts`` parameter (e.g. ``["guitar", "bass", "drums"]``, which tokenizer.json saves)
writes a song of several parts in one stream, bar by bar, as MMM and MIDI-GPT lay it out::

    BOS [piece controls] Bar Part_guitar <the guitar's bar> Part_bass <the bass's bar> Part_drums <the kit's bar>
        Bar Part_guitar ... EOS

A stringed part's bar is its tab tokens as a single part writes them after its Bar (bar controls, TimeSig, Position,
Pitch, Duration, String, techniques); a drum bar is Position and ``Drum_<key>`` tokens, one token per hit (the
General MIDI key of the kit piece; a hit has no duration and no string). The parts come in one order within a piece;
prepare picks it per piece, so a model learns to write the bass after the guitar as well as the guitar after the bass
and drums (accompaniment either way). song_tokens.py encodes and decodes; here are the vocabulary and its grammar.

These tokens go after every other token of the vocabulary (the styles a fine-tuning dataset added too), so a band
tokenizer built from a single-part run's settings keeps every one of that run's ids, and its model grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guitarformer.music.drums import DRUM_KEYS
from guitarformer.music.guitar import TOKEN_PITCH_RANGE

BAND_PARAM = "band_parts"  # TokenizerConfig parameter: the part roles a band stream may carry, in vocabulary order
PART_ROLES = ("guitar", "bass", "drums")  # the roles a band stream writes (music.score.ROLES less "other")
# The kit pieces with a token: General MIDI's percussion keys inside the tokens' pitch range.
KIT = tuple(k for k in DRUM_KEYS if TOKEN_PITCH_RANGE[0] <= k <= TOKEN_PITCH_RANGE[1])
PART, DRUM = "Part", "Drum"


def band_params(parts: Sequence[str]) -> dict[str, Any]:
    """The TokenizerConfig parameter that turns the band stream on, for these part roles (in PART_ROLES order)."""
    unknown = [p for p in parts if p not in PART_ROLES]
    if unknown or not parts:
        raise ValueError(f"band parts must be among {PART_ROLES}, not {list(parts)}")
    return {BAND_PARAM: [r for r in PART_ROLES if r in parts]}


def band_roles(tok) -> list[str] | None:
    """The part roles a tokenizer's band stream carries; None for a single-part tokenizer."""
    roles = (getattr(tok.config, "additional_params", None) or {}).get(BAND_PARAM)
    return list(roles) if roles else None


def part_token(role: str) -> str:
    return f"{PART}_{role}"


def drum_token(key: int) -> str:
    return f"{DRUM}_{key}"


def band_vocabulary(roles: Sequence[str]) -> list[str]:
    """The band's tokens, appended after the whole vocabulary: a part token per role, then a token per kit piece
    where the stream carries drums."""
    vocab = [part_token(r) for r in roles]
    if "drums" in roles:
        vocab += [drum_token(k) for k in KIT]
    return vocab


def extend_band_graph(graph: dict[str, set[str]], roles: Sequence[str]) -> dict[str, set[str]]:
    """miditok's token-type graph with the band's tokens: a Part opens a part's bar (what may follow a Bar may follow
    it, another Part too: a part silent in a bar); whatever may come before a Bar may come before a Part; a drum hit
    follows a Position or another hit and leads to what may follow a whole note."""
    after_bar = set(graph["Bar"])
    for kind, nxt in graph.items():
        if "Bar" in nxt:
            nxt.add(PART)
    graph["Bar"] = after_bar | {PART}
    graph[PART] = after_bar | {PART, "Bar", "EOS"}
    if "drums" in roles:
        graph["Position"] = set(graph["Position"]) | {DRUM}
        graph[DRUM] = {DRUM, "Position", PART, "Bar", "EOS"}
    return graph
