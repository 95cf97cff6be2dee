"""Words of memories and queries: how every store cuts text for keyword search.

Both stores search the same text: the fields in :data:`TEXT_FIELDS`, which are the properties
Neo4j's ``memory_text`` full-text index covers (``schemas/002_indexes.cypher``). A query is cut
into terms by :func:`query_terms` (words, lower-cased, as Lucene's standard analyzer cuts them;
at most :data:`MAX_QUERY_TERMS`), and a memory matches when it holds any of them. Neo4j asks
Lucene (:func:`lucene_query` escapes the terms, so user text is never query syntax); the
embedded store and the contract's scan ask :class:`graphmem.stores.text_index.TextIndex`.

It sits beside the store contract (``stores/base.py``) so that no store imports another.

>>> query_terms("Where is INV-4471? pi is 3.14, don't e-mail")
['where', 'is', 'inv', '4471', 'pi', '3.14', "don't", 'e', 'mail']
>>> tokens("苹果 とうきょうタワー 서울역 abc中文")
['苹', '果', 'と', 'う', 'き', 'ょ', 'う', 'タワー', '서울역', 'abc', '中', '文']
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from graphmem.models import AnyMemory

TEXT_FIELDS: tuple[str, ...] = (
    "content",
    "text",
    "key",
    "context",
    "task_text",
    "script",
    "action",
)
"""The memory fields keyword search reads, in the order Neo4j's ``memory_text`` index lists
them (every kind has some of them; a Note's keywords and tags are lists, which Neo4j's
full-text index does not read, so neither store does)."""

MAX_QUERY_TERMS = 64
"""A query's distinct terms beyond this many are ignored (Lucene refuses more than 1,024
clauses; a long query's first 64 words say what it is about)."""

_ONE_CHAR = (
    "\u3040-\u309f"  # Hiragana
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\U00020000-\U0003134f"  # CJK Unified Ideographs Extensions B-G
)
"""Scripts written without spaces between words, each character of which is a word, as
Lucene's standard tokenizer (Unicode's word-break rules, UAX #29) cuts them: Han ideographs
(Chinese, Japanese kanji) and Hiragana. Katakana and Hangul runs stay whole words, there too."""

_WORD = rf"[^\W{_ONE_CHAR}]+"
_TOKEN = re.compile(rf"[{_ONE_CHAR}]|{_WORD}(?:[.'’]{_WORD})*")
# Lucene query syntax: every character with a meaning there is escaped.
_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')


def tokens(text: str) -> list[str]:
    """``text`` cut into lower-cased words (``3.14`` and ``don't`` stay whole, ``e-mail`` is
    two; each Han ideograph and Hiragana character is a word of its own), close to Lucene's
    standard tokenizer, so both stores match a query against the same words."""
    return _TOKEN.findall(text.casefold())


def query_terms(query: str) -> list[str]:
    """The distinct terms of a query, in order, at most :data:`MAX_QUERY_TERMS`."""
    return list(dict.fromkeys(tokens(query)))[:MAX_QUERY_TERMS]


def memory_text(memory: AnyMemory) -> str:
    """What keyword search reads of a memory: its :data:`TEXT_FIELDS` that hold text."""
    fields = memory.__dict__  # not getattr: pydantic's is slow for a field the kind lacks
    values = (fields.get(name) for name in TEXT_FIELDS)
    return "\n".join(v for v in values if isinstance(v, str) and v)


def lucene_query(terms: Sequence[str]) -> str:
    """A Lucene query matching any of ``terms`` (each escaped, so none is query syntax; the
    terms are lower-case, so none is an AND/OR/NOT operator either)."""
    return " ".join(_LUCENE_SPECIAL.sub(r"\\\1", t) for t in terms if t)
