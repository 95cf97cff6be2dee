"""Keyword search in Chinese and Japanese (issue 55, "Input"): both stores cut CJK text into
the same words, a long CJK query degrades instead of failing retrieval on Neo4j (Lucene's
clause limit), and an absurd k is a clear error."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from graphmem import GraphMemory
from graphmem.embedding import HashingEmbedder
from graphmem.errors import InvalidInput
from graphmem.models import Note
from graphmem.stores.base import MemoryStore, TextRecall
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.words import query_terms, tokens

NOTES = [
    "我喜欢吃苹果和香蕉。",
    "东京塔在东京的港区。",
    "とうきょうタワーはきれいです。",
    "明日は雨が降るでしょう。",
    "서울역에서 만나요.",
    "The ferry leaves Lisbon at nine.",
]
QUERIES = ["苹果", "东京", "タワー", "雨", "만나요", "香蕉 ferry", "港区 Lisbon", "きれい"]

# 1,025 distinct ideographs (Lucene refuses more than 1,024 clauses), and a long paragraph.
LONG_CHINESE = "".join(chr(0x4E00 + i) for i in range(1025))
LONG_JAPANESE = ("吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。" * 60)[:1589]


def test_cjk_text_is_cut_as_lucene_cuts_it() -> None:
    assert tokens("我喜欢苹果") == ["我", "喜", "欢", "苹", "果"]
    assert tokens("タワー 서울역") == ["タワー", "서울역"]
    assert tokens("abc中文def") == ["abc", "中", "文", "def"]
    assert len(query_terms(LONG_CHINESE)) == 64  # distinct words, capped


def _ids(found: Sequence[TextRecall]) -> list[str]:
    return sorted(str(r.memory.content) for r in found if isinstance(r.memory, Note))


def test_both_stores_match_cjk_queries_alike(
    store: MemoryStore, namespace: str, tmp_path: object
) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    mem.add_notes(namespace, NOTES)
    reference = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(384))
    reference.add_notes("ref", NOTES)
    for query in QUERIES:
        got = _ids(store.recall_text(namespace, query, 10))
        want = _ids(reference.store.recall_text("ref", query, 10))
        assert got == want, query
        assert got, f"{query!r} matches a note"


@pytest.mark.parametrize(
    "query", [LONG_CHINESE, LONG_JAPANESE], ids=["1025-ideographs", "1589-chars"]
)
def test_a_long_cjk_query_degrades_instead_of_failing(
    store: MemoryStore, namespace: str, query: str
) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    mem.add_notes(namespace, [*NOTES, "吾輩は猫である。"])
    found = store.recall_text(namespace, query, 5)
    assert found, "the query's first words still match"
    hits = mem.retrieve(namespace, query, kinds=("Note",)).hits  # hybrid by default
    assert hits


def test_an_absurd_k_is_a_clear_error(store: MemoryStore, namespace: str) -> None:
    with pytest.raises(InvalidInput, match="k must be"):
        store.recall_text(namespace, "apple", 2**63)
    assert store.recall_text(namespace, "apple", 5) == []
