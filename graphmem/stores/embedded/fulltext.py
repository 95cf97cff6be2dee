"""Deprecated home of keyword search's words and index: use :mod:`graphmem.stores.words` (how
text is cut into words) and :mod:`graphmem.stores.text_index` (the BM25 index and
:func:`~graphmem.stores.text_index.rank_text`). The old names still resolve here, with a
``DeprecationWarning``, until the next release removes this module.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

from graphmem.stores import text_index, words

_MOVED: dict[str, ModuleType] = {
    **dict.fromkeys(
        ("TEXT_FIELDS", "MAX_QUERY_TERMS", "tokens", "query_terms", "memory_text", "lucene_query"),
        words,
    ),
    **dict.fromkeys(
        (
            "TextIndex",
            "entry_of",
            "rank_text",
            "KIND_CODES",
            "K1",
            "B",
            "MAX_POSTINGS_SHARE",
            "MIN_PRUNED_POSTINGS",
        ),
        text_index,
    ),
}


def __getattr__(name: str) -> Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"graphmem.stores.embedded.fulltext.{name} moved to {home.__name__}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(home, name)
