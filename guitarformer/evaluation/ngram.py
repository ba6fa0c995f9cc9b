"""ngram: an interpolated Kneser-Ney n-gram model over token ids — the floor a Transformer must clearly beat.

Chen & Goodman's interpolated Kneser-Ney with one absolute discount per order, D = n1 / (n1 + 2 n2)
from that order's count-of-counts. The highest order uses raw counts; lower orders use continuation
counts (in how many distinct contexts a word follows the shorter history), and the unigram is
interpolated with the uniform distribution over the vocabulary, so every id gets probability > 0:

    P(w | h) = max(c(h, w) - D, 0) / c(h)  +  D * N1+(h, .) / c(h) * P(w | h[1:])      (c(h) > 0)
    P(w | h) = P(w | h[1:])                                                              (c(h) = 0)
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np

START = -1  # the padding id before a sequence's first token (never predicted)


class KneserNey:
    """Order-`order` interpolated Kneser-Ney over ids 0..vocab_size-1, trained on token sequences."""

    def __init__(self, vocab_size: int, order: int = 5):
        if order < 1:
            raise ValueError("order must be >= 1")
        self.V, self.n = vocab_size, order
        # follow[k][h] = {w: count} for histories h of length k (k = 0 .. n-1); raw counts at k = n-1,
        # continuation counts below.
        self.follow: list[dict[tuple, dict[int, int]]] = [dict() for _ in range(order)]
        self.total: list[dict[tuple, int]] = [dict() for _ in range(order)]
        self.discount: list[float] = [0.75] * order

    def fit(self, sequences: Iterable[Sequence[int]]) -> "KneserNey":
        n = self.n
        counts: list[dict[tuple, int]] = [defaultdict(int) for _ in range(n)]  # by n-gram length - 1
        for seq in sequences:
            s = [START] * (n - 1) + [int(t) for t in seq]  # start padding: every token has a full history
            for i in range(n - 1, len(s)):
                counts[n - 1][tuple(s[i - n + 1: i + 1])] += 1
        for k in range(n - 2, -1, -1):  # continuation counts: distinct left extensions of each shorter n-gram
            for g in counts[k + 1]:
                counts[k][g[1:]] += 1
        for k in range(n):
            follow: dict[tuple, dict[int, int]] = defaultdict(dict)
            for g, c in counts[k].items():
                follow[g[:-1]][g[-1]] = c
            self.follow[k] = dict(follow)
            self.total[k] = {h: sum(d.values()) for h, d in follow.items()}
            cc = np.bincount(np.fromiter(counts[k].values(), dtype=np.int64, count=len(counts[k])), minlength=3)
            n1, n2 = int(cc[1]), int(cc[2])
            self.discount[k] = n1 / (n1 + 2 * n2) if n1 > 0 else 0.75
        return self

    def _history(self, context: Sequence[int]) -> tuple:
        h = tuple(int(t) for t in context)[-(self.n - 1):] if self.n > 1 else ()
        return (START,) * (self.n - 1 - len(h)) + h

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        """P(. | context) over the whole vocabulary (float64, sums to 1)."""
        h = self._history(context)
        p = np.full(self.V, 1.0 / self.V)
        for k in range(0, len(h) + 1):  # from the unigram up to the longest history
            hk = h[len(h) - k:] if k else ()
            d = self.follow[k].get(hk)
            if not d:
                continue
            tot, D = self.total[k][hk], self.discount[k]
            p *= D * len(d) / tot
            ws = np.fromiter(d.keys(), dtype=np.int64, count=len(d))
            cs = np.fromiter(d.values(), dtype=np.float64, count=len(d))
            np.add.at(p, ws, np.maximum(cs - D, 0.0) / tot)
        return p

    def prob(self, context: Sequence[int], w: int) -> float:
        """P(w | context), the same value as distribution(context)[w] without building the vector."""
        h = self._history(context)
        w = int(w)
        p = 1.0 / self.V
        for k in range(0, len(h) + 1):
            hk = h[len(h) - k:] if k else ()
            d = self.follow[k].get(hk)
            if not d:
                continue
            tot, D = self.total[k][hk], self.discount[k]
            p = max(d.get(w, 0) - D, 0.0) / tot + D * len(d) / tot * p
        return p

    def score(self, tokens: Sequence[int], start: int = 1, contexts_from: int = 0,
              accuracy: bool = False) -> dict[str, float]:
        """NLL (nats/token), perplexity and (optionally) argmax accuracy of tokens[start:], each predicted
        from at most order-1 previous tokens, never reaching before index `contexts_from` (start-padded there)."""
        toks = [int(t) for t in tokens]
        nll, correct, cache = 0.0, 0, {}
        m = len(toks) - start
        for i in range(start, len(toks)):
            ctx = toks[max(contexts_from, i - self.n + 1): i]
            nll -= math.log(self.prob(ctx, toks[i]))
            if accuracy:
                key = tuple(ctx)
                if key not in cache:
                    cache[key] = int(np.argmax(self.distribution(ctx)))
                correct += cache[key] == toks[i]
        m = max(m, 1)
        return {"nll": nll / m, "ppl": math.exp(min(nll / m, 50.0)), "accuracy": correct / m, "tokens": m}
