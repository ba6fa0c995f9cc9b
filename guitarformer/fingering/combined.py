"""fret() that listens to the model: a tab-token model's string log-probabilities as one more cost of fret()'s Viterbi.

The model alone (`refinger`, fingering/tab_model.py) chooses each note's string from the tokens before it, so it
cannot weigh where the hand has to go next; fret() weighs hand shifts, stretches and positions over the whole
part, with no ear for the idiom a model learns from people. Together: `string_costs` reads a part's tokens once
with teacher forcing and keeps, at every note, the model's log-probabilities of the strings, renormalised over
the strings (so what the model gives to other tokens there does not count): in tab layout 2 those of the String
tokens at the note's String position; in layout 3 at the note's Duration, where the lowest-fret string's is the
mass of every token that is not a String (the note ends without one) and each other string's that of its String
token. `finger_combined` adds `weight * -log p(string)` per note to fret()'s costs (`fret(..., extra=...)`) and
decodes the part again. The context the model reads is the part fingered by fret() (by the previous round with
`rounds` > 1), encoded in the tokenizer's layout: the strings before a note are fret()'s, not the final ones; one
forward pass per window, no search.

`weight` is in fret()'s cost units per nat; `MODEL_WEIGHT` was chosen on the validation files of the training
half (docs/results/FINGERING_MODEL.md), never on the held-out half the benchmark scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from guitarformer.vocab.tab_tokens import MAX_STRINGS, lowest_fret_string
from guitarformer.vocab.tokenization import encode
from guitarformer.fingering.viterbi import fret
from guitarformer.generation.decode.engine import in_eval_mode
from guitarformer.fingering.tab_model import Guitar, TabVocab, check_fingering_run, token_note_of
from guitarformer.fingering.tab_rows import string_windows
from guitarformer.music.score import GuitarScore

MODEL_WEIGHT = 1.0  # fret() cost units per nat of the model's -log p(string)


@in_eval_mode
@torch.inference_mode()
def string_logprobs(model, tokenizer, sequences: Sequence[Sequence[int]], device=None, batch_size: int = 64,
                    context: int | None = None, guitars: Sequence[Guitar] | None = None) -> list[np.ndarray]:
    """Per sequence, (token notes, MAX_STRINGS) log p(string s | the tokens before the choice) for each note, in
    token order, teacher-forced in `refinger`'s windows (one forward pass each, batched), renormalised over the
    strings: layout 2 at each String position; layout 3 at each note's Duration, the lowest-fret string in
    `guitars[k]` (the (tuning, capo) of sequence k; needed there) taking the mass of every token but a String
    (module docstring). The model runs in eval mode under inference mode and is given back in the mode it came
    in."""
    check_fingering_run(model, tokenizer)
    device, v, jobs = string_windows(model, tokenizer, sequences, device, context)
    if v.implied and (guitars is None or len(guitars) != len(sequences)):
        raise ValueError("tab layout 3 writes no String for a note on its lowest-fret string: string_logprobs "
                         "needs each sequence's (tuning, capo)")
    if v.implied:
        return _note_logprobs(model, v, sequences, device, batch_size, jobs, guitars)
    string_ids = torch.tensor(v.string_ids, device=device)
    found: dict[tuple[int, int], np.ndarray] = {}  # (sequence, position of a String) -> log-probs
    for i in range(0, len(jobs), batch_size):
        part = jobs[i:i + batch_size]
        x = torch.full((len(part), max(b - a for _, a, b in part)), v.pad, dtype=torch.long)
        for r, (k, a, b) in enumerate(part):
            x[r, :b - a] = torch.as_tensor(list(sequences[k][a:b]))
        lp = model(x.to(device))[0].float().index_select(-1, string_ids).log_softmax(-1).cpu().numpy()
        for r, (k, a, b) in enumerate(part):
            for j in range(a + 1, b):
                if sequences[k][j] in v.string_of:
                    found[(k, j)] = lp[r, j - 1 - a]
    out = []
    for k, seq in enumerate(sequences):
        rows = [found.get((k, j), np.zeros(MAX_STRINGS)) for j, t in enumerate(seq) if t in v.string_of]
        out.append(np.array(rows).reshape(len(rows), MAX_STRINGS))
    return out


def _note_logprobs(model, v: TabVocab, sequences: Sequence[Sequence[int]], device, batch_size: int,
                   jobs: list[tuple[int, int, int]], guitars: Sequence[Guitar]) -> list[np.ndarray]:
    """`string_logprobs` for tab layout 3: at each note's Duration, log p(String_s) for the strings off the lowest
    fret and the log of the mass of every token but a String for the lowest-fret one, renormalised over the
    strings."""
    string_ids = torch.tensor(v.string_ids, device=device)
    not_string = torch.tensor(v.not_string, device=device)
    found: dict[tuple[int, int], np.ndarray] = {}  # (sequence, position of a note's Duration) -> log-probs
    for i in range(0, len(jobs), batch_size):
        part = jobs[i:i + batch_size]
        x = torch.full((len(part), max(b - a for _, a, b in part)), v.pad, dtype=torch.long)
        for r, (k, a, b) in enumerate(part):
            x[r, :b - a] = torch.as_tensor(list(sequences[k][a:b]))
        logits = model(x.to(device))[0].float()
        strings = logits.index_select(-1, string_ids).cpu().numpy()  # (rows, T, MAX_STRINGS)
        ends = logits.index_select(-1, not_string).logsumexp(-1).cpu().numpy()  # (rows, T): no String next
        for r, (k, a, b) in enumerate(part):
            seq = sequences[k]
            tuning, capo = tuple(guitars[k][0]), int(guitars[k][1])
            for j, end in enumerate(v.note_ends(seq[a:b]), a):
                if end:
                    row = strings[r, j - a].copy()
                    row[lowest_fret_string(tuning, capo, v.note_pitch(seq, j)) - 1] = ends[r, j - a]
                    found[(k, j)] = row - np.logaddexp.reduce(row)
    out = []
    for k, seq in enumerate(sequences):
        rows = [found.get((k, j), np.zeros(MAX_STRINGS)) for j, e in enumerate(v.note_ends(seq)) if e]
        out.append(np.array(rows, dtype=np.float64).reshape(len(rows), MAX_STRINGS))
    return out


def string_costs(tokenizer, gs: GuitarScore, ids: Sequence[int], logp: np.ndarray, weight: float) -> np.ndarray:
    """fret()'s `extra` for `gs`: weight * -log p(string) per (note, string index from the lowest), 0 for notes the
    tokens do not hold and in the unplayable column."""
    n = len(gs.tuning)
    out = np.zeros((len(gs.track.notes), n + 1))
    of, _ = token_note_of(tokenizer, gs, ids)
    for i, k in enumerate(of):
        if k is not None and k < len(logp):
            out[i, :n] = -weight * logp[k, :n][::-1]  # column 0 = the lowest string = String_n
    return out


def finger_combined(model, tokenizer, scores: Sequence[GuitarScore], weight: float = MODEL_WEIGHT,
                    rounds: int = 1, device=None, batch_size: int = 64, context: int | None = None
                    ) -> list[list[tuple[int, int]]]:
    """One (string, fret) per note of each part (fret()'s form: UNPLAYABLE where no string sounds the pitch):
    fret()'s Viterbi with the model's `weight * -log p(string)` added per note (module docstring). Each round
    reads the part as the round before fingered it (the first: as fret() alone does)."""
    fingered = [fret(list(gs.track.notes), gs.tuning, gs.capo, program=gs.track.program) for gs in scores]
    for _ in range(max(1, rounds)):
        seqs = [encode(tokenizer, replace(gs, frets=f)) for gs, f in zip(scores, fingered)]
        lps = string_logprobs(model, tokenizer, seqs, device, batch_size, context,
                              [(tuple(gs.tuning), gs.capo) for gs in scores])
        fingered = [fret(list(gs.track.notes), gs.tuning, gs.capo, program=gs.track.program,
                         extra=string_costs(tokenizer, gs, ids, lp, weight))
                    for gs, ids, lp in zip(scores, seqs, lps)]
    return fingered
