"""A small Okapi BM25 for the benchmarks' keyword baseline rows (``rank_bm25`` is not a
dependency; this follows its ``BM25Okapi``: k1 = 1.5, b = 0.75, and an idf floor of
ε · mean idf for terms in more than half the documents, ε = 0.25).

Texts are cut into words as graphmem's keyword search cuts them
(:func:`graphmem.stores.words.tokens`), so the baseline and the library read the
same words.

>>> BM25(["the cat sat", "a dog ran", "a bird flew", "the dog swam"]).ranking("dog swam")
[3, 0, 1, 2]
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from graphmem.stores.words import tokens


class BM25:
    def __init__(
        self, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(tokens(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        n = len(self.docs)
        self.avgdl = sum(self.lengths) / n if n else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        self.idf = {t: math.log((n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        floor = epsilon * (sum(self.idf.values()) / len(self.idf)) if self.idf else 0.0
        self.idf = {t: (v if v >= 0 else floor) for t, v in self.idf.items()}
        self.postings: dict[str, list[int]] = {}
        for i, d in enumerate(self.docs):
            for t in d:
                self.postings.setdefault(t, []).append(i)

    def scores(self, query: str) -> list[float]:
        out = [0.0] * len(self.docs)
        for term in tokens(query):  # repeated query words count again, as in rank_bm25
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i in self.postings[term]:
                tf = self.docs[i][term]
                norm = 1 - self.b + self.b * self.lengths[i] / self.avgdl
                out[i] += idf * tf * (self.k1 + 1) / (tf + self.k1 * norm)
        return out

    def ranking(self, query: str) -> list[int]:
        """Document indexes, best first (ties in document order)."""
        s = self.scores(query)
        return sorted(range(len(s)), key=lambda i: (-s[i], i))
