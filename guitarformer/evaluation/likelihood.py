"""Likelihood: token NLL, perplexity and accuracy of a model (and of the n-gram floor) on a split."""

from __future__ import annotations

import numpy as np

from guitarformer import IGNORE_INDEX
from guitarformer.vocab.controls import PREFIX
from guitarformer.data.dataset import PLAIN, DecoderWindows
from guitarformer.models.kinds import kind_of
from guitarformer.models.loss import nll, summarize


def continuation_nll(model, pairs, device, batch_size: int = 16) -> dict[str, float]:
    """NLL/perplexity/accuracy on the target tokens of Seq2SeqPairs, for either model kind: the same tokens are
    scored either way (models/kinds.py says how each kind reads a pair)."""
    kind = kind_of(model)
    return nll(model, (kind.continuation(*b) for b in pairs.eval_batches(batch_size)), device)


def stream_nll(model, part, block_size: int, device, batch_size: int = 16) -> dict[str, float]:
    """Decoder NLL over a split's concatenated tokens in consecutive windows, on the plain stream (no control
    tokens), as training validates."""
    kind = kind_of(model)
    windows = DecoderWindows(part, block_size, control_dropout=PLAIN)
    return nll(model, (kind.inputs(b) for b in windows.eval_batches(batch_size)), device)


def plain_tokens(part, tokenizer) -> np.ndarray:
    """A split's tokens without control tokens: the stream the model is scored on, for the n-gram to fit and score."""
    ids = np.asarray(part.tokens, dtype=np.int64)
    controls = [i for t, i in tokenizer.vocab.items() if t.startswith(PREFIX)]
    return ids[~np.isin(ids, controls)] if controls else ids


def ngram_continuation(lm, pairs) -> dict[str, float]:
    """The n-gram's NLL on the same target tokens as `continuation_nll`."""
    total, correct, count = 0.0, 0, 0
    for src, mask, _, y in pairs.eval_batches(64):
        for s, m, t in zip(src.numpy(), mask.numpy(), y.numpy()):
            s, t = s[m], t[t != IGNORE_INDEX]
            r = lm.score(np.concatenate([s, t]), start=len(s), accuracy=True)
            total += r["nll"] * r["tokens"]
            correct += round(r["accuracy"] * r["tokens"])
            count += r["tokens"]
    return summarize(total, correct, count)
