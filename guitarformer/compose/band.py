"""The band: a riff of several parts from nothing, and the parts written for given ones (accompaniment).

`band_rows` samples band streams (vocab/parts.py) under the BandConstraint, all parts at once, bar by bar, in the
parts' order. `accompany_rows` writes the parts a song lacks for the parts it has: bar by bar and part by part in the
band's order, a given part's bar the song's own tokens (never sampled), a written part's bar sampled after all that
comes before it until that part's bar may end (with the guitar given first, the bass and drums hear the bar they go
with; with the rhythm first, the guitar hears the groove). `band_parts`
decodes a row into (role, part) pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from guitarformer.vocab.parts import PART, part_token
from guitarformer.vocab.song_tokens import bars_of, decode_song, encode_song
from guitarformer.vocab.tokenization import special_ids
from guitarformer.generation.constraint.band import BandConstraint, BandPlan
from guitarformer.compose.conditioning import Conditions
from guitarformer.generation.decode.engine import StopTokens, generate
from guitarformer.compose.riffs import riff_seed
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.music.score import GuitarScore

ROOM = 320  # tokens kept free in the context for the bar being written (accompaniment's sliding history)


@dataclass
class BandAsk:
    """What the band is asked: the parts' `order`, each stringed part's (tuning, capo), the guitar's `asked` controls
    (piece controls after BOS, bar controls, the meter), the number of riffs and their seed."""

    order: list[str]
    tunings: dict[str, tuple[tuple[int, ...], int]]
    asked: Conditions | None = None
    num: int = 1
    seed: int = 0


def _generators(ask: BandAsk) -> list[torch.Generator]:
    return [torch.Generator(device="cpu").manual_seed(riff_seed(ask.seed, k)) for k in range(ask.num)]


def band_prompt(tok, ask: BandAsk) -> list[int]:
    """BOS, the guitar's piece controls, and where any are asked the first Bar opened: the first part's token, the
    guitar's bar controls (if it comes first) and the meter."""
    asked = ask.asked or Conditions()
    ids = [special_ids(tok)["bos"], *asked.piece]
    meter = [i for i in asked.meter if tok[i].startswith("TimeSig_")]
    if asked.bar or meter:
        first = ask.order[0]
        ids += [tok.vocab["Bar_None"], tok.vocab[part_token(first)], *(asked.bar if first == "guitar" else []),
                *meter]
    return ids


def band_rows(model, tok, ask: BandAsk, params: SamplingParams) -> list[list[int]]:
    """`ask.num` band streams from nothing, `params.max_bars` bars each (BOS ... EOS)."""
    prompt = band_prompt(tok, ask)
    opens = tok.vocab["Bar_None"] in prompt
    asked = ask.asked or Conditions()
    plan = BandPlan(ask.order, ask.tunings, asked.bar_controls() if asked.bar or asked.schedule else None,
                    opens=opens)
    bars = params.max_bars
    limit = None if bars is None else bars - 1 if opens else bars
    eos = special_ids(tok)["eos"]
    out = generate(model, torch.tensor([prompt] * ask.num, dtype=torch.long), replace(params, max_bars=limit),
                   generator=_generators(ask), constraint=BandConstraint(tok, plan),
                   stops=StopTokens(eos_id=eos, bar_ids=[tok.vocab["Bar_None"]]))
    return [_until_eos(row, eos) for row in out.tolist()]


def _until_eos(row: list[int], eos: int) -> list[int]:
    return row[:row.index(eos, 1) + 1] if eos in row[1:] else row + [eos]


def given_bars(tok, given: Sequence[tuple[str, GuitarScore]]) -> tuple[list[int], list[dict[str, list[int]]]]:
    """(BOS and the piece controls, each bar's given tokens by role) of the given parts' band stream."""
    head, bars = bars_of(tok, encode_song(tok, given)[:-1])  # without EOS
    by_role: list[dict[str, list[int]]] = []
    for bar in bars:  # each bar's ids cut at its part tokens
        by_role.append({})
        role = ""
        for i in bar:
            t = tok[i]
            if t.startswith(PART + "_"):
                role = t.split("_", 1)[1]
                by_role[-1][role] = []
            else:
                by_role[-1][role].append(i)
    return head, by_role


def accompany_rows(model, tok, ask: BandAsk, given: Sequence[tuple[str, GuitarScore]], params: SamplingParams,
                   block_size: int) -> list[list[int]]:
    """`ask.num` band streams whose `given` parts (role, part) are the song's and whose other parts in `ask.order`
    are written for them, bar by bar, part by part in `ask.order` (`params.max_bars` bars at most; None: every bar of
    the given parts): a given part's bar is its own tokens, a written part's bar is sampled after everything before
    it (the bars before, and this bar's parts earlier in the order), until the part's bar may end."""
    head, bars = given_bars(tok, given)
    bars = bars[:params.max_bars] if params.max_bars else bars
    plan = BandPlan(ask.order, ask.tunings, None, given=tuple(r for r, _ in given), opens=True, segment=True)
    eos, bar = special_ids(tok)["eos"], tok.vocab["Bar_None"]
    gens = _generators(ask)
    rows = []
    for k in range(ask.num):
        body: list[int] = []
        starts: list[int] = []  # where each bar begins in body
        for chunk in bars:
            starts.append(len(body))
            body.append(bar)
            for role in ask.order:
                body.append(tok.vocab[part_token(role)])
                if role in plan.given:
                    body += chunk.get(role, [])
                    continue
                cut = next((s for s in starts if len(head) + len(body) - s < block_size - ROOM), starts[-1])
                prompt = head + body[cut:]
                out = generate(model, torch.tensor([prompt], dtype=torch.long), replace(params, max_bars=0),
                               generator=gens[k], constraint=BandConstraint(tok, plan),
                               stops=StopTokens(eos_id=eos, bar_ids=[bar]))
                new = out[0, len(prompt):].tolist()
                body += new[:new.index(eos)] if eos in new else new
        rows.append(head + body + [eos])
    return rows


def band_parts(tok, row: Sequence[int], ask: BandAsk, tempo: float | None = None
               ) -> list[tuple[str, GuitarScore]]:
    """The (role, part) pairs of a band stream, in `ask.order`."""
    parts = dict(decode_song(tok, row, ask.tunings, tempo=tempo))
    return [(r, parts[r]) for r in ask.order if r in parts]
