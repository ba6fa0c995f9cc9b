"""Bar infilling layouts: how a piece with some bars masked is written as tokens, for both model kinds.

A model learns to fill bars i..j of a piece given the bars before and after them. Three tokens make it possible:
``FillBar`` stands in for one masked bar (so the model knows how many bars to write), ``FillStart`` opens the fill
and ``FillEnd`` closes it. For a piece ``BOS head B1 .. Bn`` (head: what comes before the first Bar, e.g. piece
controls) and a span [i, j]:

  decoder, one causal stream, the bars after the gap first ("suffix, prefix, middle"):
      BOS head B(j+1)..Bn FillStart B1..B(i-1) FillBar x (j-i+1) Bi..Bj FillEnd
  decoder, the first layout (placeholders in place, as MIDI-GPT does), still read for runs trained with it:
      BOS head B1..B(i-1) FillBar x (j-i+1) B(j+1)..Bn FillStart Bi..Bj FillEnd
  encoder-decoder (masked bars in the source):
      source  BOS head B1..B(i-1) FillBar x (j-i+1) B(j+1)..Bn
      target  BOS Bi..Bj EOS

The decoder's fill is plain next-token prediction after everything around the gap. In the first layout the bars
after the gap sat between the fill and the bars before it, and the shipped model of that layout wrote the gap worse
with them than without them (0.499 against 0.485 nats/token with the same bars before; 0.480 as a plain
continuation): a small model leans on what it read last. With the bars after the gap first, the fill continues the
bars before it exactly as a plain stream does, and the bars after it are context further back that the model can
copy from (Bavarian et al. 2022 found the same order, suffix-prefix-middle, the better one for code). The
tokenizer says which layout its runs use (`guitar_infill`: "spm", or true for the first). In training (data/dataset.py)
a share `data.infill` of windows or pairs becomes such an example, with a random span of 1..MAX_SPAN_BARS bars that
has music before it and whole bars after it (never a bar cut mid-way: the `infill` command gives whole bars, and a
model shown cut ones learns not to rely on what follows the gap); the loss skips the FillBar and FillStart targets: where the placeholders go is the
sampler's choice, not music, and a model that learned to predict them would drop them into plain samples.

The tokens exist in a tokenizer built with `infill_params()` (TabREMI datasets from this version on); they are
appended after every other token, so the ids of the rest never change, and `extend_graph` adds them to
`tokens_types_graph` where they occur, so the sampler's grammar and `tokens_errors` know them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from guitarformer.errors import GuitarformerError

FILL_BAR, FILL_START, FILL_END = "FillBar_None", "FillStart_None", "FillEnd_None"
FILL_TOKENS = (FILL_BAR, FILL_START, FILL_END)
INFILL_PARAM = "guitar_infill"  # TokenizerConfig parameter: adds the fill tokens; its value names the layout
SPM = "spm"  # the value of tokenizers that lay the decoder's fill out suffix first (module docstring); True: the first
MAX_SPAN_BARS = 4  # training spans: 1..4 bars
SKIP_TARGETS = (FILL_BAR, FILL_START)  # targets without loss (module docstring)
NO_INFILL_FIX = "train a run with infilling: guitarformer train --set data.infill=0.3 (on a TabREMI dataset " \
                "prepared by this version: prepare it again with --force if it is older)"


def infill_params() -> dict[str, bool]:
    """The TokenizerConfig parameter that adds the fill tokens."""
    return {INFILL_PARAM: SPM}


def infill_on(tok) -> bool:
    """Whether a tokenizer's config asks for the fill tokens (read while its vocabulary is built)."""
    params = getattr(tok.config, "additional_params", None) or {}
    return bool(params.get(INFILL_PARAM))


def has_fill_tokens(tok) -> bool:
    return tok is not None and all(t in tok.vocab for t in FILL_TOKENS)


def extend_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """`tokens_types_graph` with the fill tokens: FillBar, FillStart and FillEnd may come wherever a Bar may
    (a bar ended); FillBar leads to another FillBar, a Bar or FillStart; FillStart to a Bar (or to the
    placeholders, for a gap at the start); FillEnd ends the piece."""
    ends_a_bar = [t for t, nxt in graph.items() if "Bar" in nxt]
    for t in ends_a_bar:
        graph[t] = set(graph[t]) | {"FillBar", "FillStart", "FillEnd"}
    graph["FillBar"] = {"FillBar", "Bar", "FillStart"}
    graph["FillStart"] = {"Bar", "FillBar"}  # FillBar: a gap at the piece's start in the suffix-first layout
    graph["FillEnd"] = {"EOS"}
    return graph


@dataclass(frozen=True)
class FillIds:
    """The ids a layout needs, from one tokenizer."""

    bar: int
    start: int
    end: int
    bos: int
    eos: int
    pad: int
    bars: tuple[int, ...]  # ids that open a bar
    spm: bool = False  # the decoder's layout: the bars after the gap first (module docstring)

    @classmethod
    def of(cls, tok) -> FillIds:
        if not has_fill_tokens(tok):
            raise GuitarformerError("this tokenizer has no infilling tokens (FillBar, FillStart, FillEnd): it is "
                                    "not TabREMI, or it was prepared before infilling existed", NO_INFILL_FIX)
        if getattr(tok, "is_trained", False):
            raise GuitarformerError("infilling works on base tokens, not BPE ones",
                                    "prepare the dataset with bpe_vocab_size 0")
        spm = (getattr(tok.config, "additional_params", None) or {}).get(INFILL_PARAM) == SPM
        return cls(tok[FILL_BAR], tok[FILL_START], tok[FILL_END], tok["BOS_None"], tok["EOS_None"],
                   tok.pad_token_id, tuple(int(i) for i in tok.token_ids_of_type("Bar")), spm)


# ---------------------------------------------------------------- layouts of whole bars


def split_bars(ids: Sequence[int], bar_ids: Sequence[int]) -> tuple[list[int], list[list[int]]]:
    """(head, bars) of a piece's content ids (no BOS/EOS): head = the tokens before the first Bar, then one list per
    bar, each starting with its Bar token."""
    head: list[int] = []
    bars: list[list[int]] = []
    is_bar = set(int(b) for b in bar_ids)
    for i in ids:
        i = int(i)
        if i in is_bar:
            bars.append([i])
        elif bars:
            bars[-1].append(i)
        else:
            head.append(i)
    return head, bars


def _flat(bars: Sequence[Sequence[int]]) -> list[int]:
    return [int(i) for b in bars for i in b]


def decoder_layout(f: FillIds, head: Sequence[int], before: Sequence[Sequence[int]], span: Sequence[Sequence[int]],
                   after: Sequence[Sequence[int]]) -> tuple[list[int], int]:
    """(ids, fill_at): the decoder's layout of bars `span` between `before` and `after` (f.spm: which one, module
    docstring), and the index of the fill's first token: ids[:fill_at] is the prompt a model continues."""
    if f.spm:
        prompt = [f.bos, *map(int, head), *_flat(after), f.start, *_flat(before), *[f.bar] * len(span)]
    else:
        prompt = [f.bos, *map(int, head), *_flat(before), *[f.bar] * len(span), *_flat(after), f.start]
    return prompt + _flat(span) + [f.end], len(prompt)


def seq2seq_layout(f: FillIds, head: Sequence[int], before: Sequence[Sequence[int]], span: Sequence[Sequence[int]],
                   after: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """(source, target) of the encoder-decoder: the bars around the gap with FillBar placeholders, then the bars."""
    src = [f.bos, *map(int, head), *_flat(before), *[f.bar] * len(span), *_flat(after)]
    return src, [f.bos, *_flat(span), f.eos]


def _run(ids: list[int], token: int, start: int = 0) -> tuple[int, int]:
    """[a, b): the first run of `token` in ids from `start` (it occurs there)."""
    a = b = ids.index(token, start)
    while b < len(ids) and ids[b] == token:
        b += 1
    return a, b


def unfold(f: FillIds, ids: Sequence[int]) -> list[int]:
    """The piece a decoder layout stands for (BOS head B1..Bn): the fill's bars put back in place of the
    placeholders. The inverse of `decoder_layout`, either layout (a layout without FillStart comes back as it
    is); the tokens before the first bar line are the head."""
    ids = [int(i) for i in ids]
    if f.start not in ids:
        return ids
    s = ids.index(f.start)
    if f.end in ids:
        ids = ids[:ids.index(f.end)]
    if f.bar in ids[s:]:  # suffix first: BOS head after FillStart before FillBar.. fill FillEnd
        a, b = _run(ids, f.bar, s)
        h = next((j for j in range(1, s) if ids[j] in f.bars), s)
        return ids[:h] + ids[s + 1:a] + ids[b:] + ids[h:s]
    context, fill = ids[:s], ids[s + 1:]  # placeholders in place: BOS head before FillBar.. after FillStart fill
    if f.bar not in context:
        return context + fill
    a, b = _run(context, f.bar)
    return context[:a] + fill + context[b:]


# ---------------------------------------------------------------- training examples


def _pick_span(bar_at: np.ndarray, gen: torch.Generator, fits, first: int = 1) -> tuple[int, int] | None:
    """(a, k): a span of k bars starting at bar_at[a], a >= `first` (music before it), with a bar line after it
    (a + k < len(bar_at)), for which `fits(a, k)`; k drawn in 1..MAX_SPAN_BARS and lowered until one fits."""
    k = int(torch.randint(1, MAX_SPAN_BARS + 1, (1,), generator=gen))
    for k in range(k, 0, -1):
        ok = [a for a in range(first, len(bar_at) - k) if fits(a, k)]
        if ok:
            return ok[int(torch.randint(0, len(ok), (1,), generator=gen))], k
    return None


def bar_ends(bar_at: np.ndarray, size: int, whole_end: bool) -> np.ndarray:
    """Where whole bars of a stretch of `size` tokens end (exclusive): at each bar line after the first, and at
    the stretch's end when it ends the piece (`whole_end`); a stretch cut mid-piece ends in a partial bar."""
    ends = bar_at[1:]
    return np.append(ends, size) if whole_end and len(bar_at) and bar_at[-1] < size else ends


def _after_end(ends: np.ndarray, e: int, limit: int) -> int | None:
    """The end of the most whole bars from bar line `e` that end at or before `limit`; None if not one does."""
    fit = ends[(ends > e) & (ends <= limit)]
    return int(fit[-1]) if len(fit) else None


def decoder_example(f: FillIds, content: np.ndarray, length: int, gen: torch.Generator, whole_end: bool = False
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """(window, skip) for a decoder: `content` (a stretch of one piece, no BOS/EOS, may start mid-bar; it ends the
    piece where `whole_end`, else its last bar counts as cut) in the layout `decoder_layout` writes (f.spm), at most `length` tokens, padded with PAD to `length`; `skip` (length - 1,) bool marks the targets without
    loss (placeholders, padding). The after part is whole bars, at least one, as `guitarformer infill` gives them:
    a model trained on bars cut mid-way learns to ignore what follows the gap. None: no span fits."""
    bar_at = np.nonzero(np.isin(content, f.bars))[0]
    ends = bar_ends(bar_at, len(content), whole_end)
    # BOS, k FillBars, FillStart, FillEnd around the content: before + span + after = content[:t] in length - 3 - k.
    # Content that starts mid-bar has music before its first bar line.
    picked = _pick_span(bar_at, gen, lambda a, k: _after_end(ends, bar_at[a + k], length - 3 - k) is not None,
                        first=0 if len(bar_at) and bar_at[0] > 0 else 1)
    if picked is None:
        return None
    a, k = picked
    s, e = int(bar_at[a]), int(bar_at[a + k])
    t = _after_end(ends, e, length - 3 - k)
    if f.spm:  # what comes before the first bar line (opening controls, a bar's tail) stays in front, as a head
        h = int(bar_at[0])
        parts = [[f.bos], content[:h], content[e:t], [f.start], content[h:s], [f.bar] * k, content[s:e], [f.end]]
    else:
        parts = [[f.bos], content[:s], [f.bar] * k, content[e:t], [f.start], content[s:e], [f.end]]
    seq = np.concatenate(parts)
    seq = seq.astype(np.int64)
    w = np.full(length, f.pad, dtype=np.int64)
    w[: len(seq)] = seq
    skip = np.ones(length - 1, dtype=bool)
    skip[: len(seq) - 1] = np.isin(seq[1:], [f.bar, f.start])
    return w, skip


def seq2seq_example(f: FillIds, before: np.ndarray, rest: np.ndarray, src_len: int, gen: torch.Generator,
                    head: np.ndarray | None = None, whole_end: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """(source, target) for an encoder-decoder: the span opens `rest` (which starts with a Bar and ends the piece
    where `whole_end`, else its last bar counts as cut), `before` is what comes before it, `head` (the piece's
    opening controls, if any) goes right after BOS. Source BOS head before FillBar.. after within `src_len` tokens:
    after is whole bars (at least one), about half of the room where both sides have more, before takes the rest;
    target span + EOS. None: no span with a whole bar after it that fits."""
    head = np.zeros(0, dtype=np.int64) if head is None else head
    bar_at = np.nonzero(np.isin(rest, f.bars))[0]
    if len(bar_at) == 0 or bar_at[0] != 0:
        return None
    ends = bar_ends(bar_at, len(rest), whole_end)
    room = lambda k: max(0, src_len - 1 - len(head) - k)  # noqa: E731 - the source's room beside BOS, head, FillBars
    picked = _pick_span(np.concatenate([[-1], bar_at]), gen,
                        lambda a, k: a == 1 and _after_end(ends, bar_at[k], bar_at[k] + room(k)) is not None)
    if picked is None:
        return None
    _, k = picked
    e = int(bar_at[k])
    # Half the room for the bars after the gap where the before side can fill the other half; at least one bar.
    limit = e + max(room(k) // 2, room(k) - len(before))
    t = _after_end(ends, e, limit) or _after_end(ends, e, e + room(k))
    n_before = min(len(before), room(k) - (t - e))
    src = np.concatenate([[f.bos], head, before[len(before) - n_before:], [f.bar] * k, rest[e:t]])
    return src.astype(np.int64), np.concatenate([rest[:e], [f.eos]]).astype(np.int64)
