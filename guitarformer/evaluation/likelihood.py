"""Likelihood: token NLL, perplexity and accuracy of a model (and of the n-gram floor) on a split."""

from __future__ import annotations

import numpy as np
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.data.dataset import DecoderWindows
from guitarformer.models.loss import summarize, token_stats


def continuation_nll(model, kind: str, pairs, device, batch_size: int = 16) -> dict[str, float]:
    """NLL/perplexity/accuracy on the target tokens of Seq2SeqPairs, for either model kind.

    Encoder-decoder: source through the encoder, target teacher-forced after BOS. Decoder: the source tokens
    are the prefix, the target follows, and only target positions are scored — the same tokens either way.
    """

    model.eval()
    nll, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for src, mask, tgt, y in pairs.eval_batches(batch_size):
            if kind == "decoder":
                rows, ys = [], []
                for s, m, t in zip(src, mask, y):
                    s, t = s[m], t[t != IGNORE_INDEX]
                    inp = torch.cat([s, t])[:-1]
                    tt = torch.full_like(inp, IGNORE_INDEX)
                    tt[len(s) - 1:] = t  # position len(s)-1 (last source token) predicts the first target token
                    rows.append(inp)
                    ys.append(tt)
                L = max(len(r) for r in rows)
                x = torch.zeros(len(rows), L, dtype=torch.long)
                yy = torch.full((len(rows), L), IGNORE_INDEX, dtype=torch.long)
                for i, (r, t) in enumerate(zip(rows, ys)):  # right padding: causal attention never sees it
                    x[i, : len(r)] = r
                    yy[i, : len(t)] = t
                logits, _ = model(x.to(device))
                a, b, c = token_stats(logits, yy.to(device))
            else:
                logits, _ = model(src.to(device), tgt.to(device), src_key_mask=mask.to(device))
                a, b, c = token_stats(logits, y.to(device))
            nll, correct, count = nll + a, correct + b, count + c
    return summarize(nll, correct, count)


def stream_nll(model, part, block_size: int, device, batch_size: int = 16) -> dict[str, float]:
    """Decoder NLL over a split's concatenated tokens in consecutive windows (as training validates)."""


    model.eval()
    nll, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in DecoderWindows(part, block_size).eval_batches(batch_size):
            logits, _ = model(x.to(device))
            a, b, c = token_stats(logits, y.to(device))
            nll, correct, count = nll + a, correct + b, count + c
    return summarize(nll, correct, count)


def ngram_continuation(lm, pairs) -> dict[str, float]:
    """The n-gram's NLL on the same target tokens as `continuation_nll`."""
    nll, correct, count = 0.0, 0, 0
    for src, mask, _, y in pairs.eval_batches(64):
        for s, m, t in zip(src.numpy(), mask.numpy(), y.numpy()):
            s, t = s[m], t[t != IGNORE_INDEX]
            r = lm.score(np.concatenate([s, t]), start=len(s), accuracy=True)
            nll += r["nll"] * r["tokens"]
            correct += round(r["accuracy"] * r["tokens"])
            count += r["tokens"]
    return summarize(nll, correct, count)
