"""Keyword recall and hybrid retrieval beyond the conformance suite: the embedded store's
keyword index across handles, compaction and reopening, saved beside the store and checked by
``store check``, the Lucene query escaping, the fusion arithmetic, and retrieval end to end."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import drop_namespaces

from graphmem import GraphMemory, HashingEmbedder
from graphmem.models import Edge, EdgeKind
from graphmem.ops.fusion import rrf
from graphmem.stores import text_index
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded import store as embedded_store
from graphmem.stores.embedded.check import check_store
from graphmem.stores.text_index import TextIndex
from graphmem.stores.words import MAX_QUERY_TERMS, TEXT_FIELDS, lucene_query, query_terms
from graphmem.testing import note, vec

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "002_indexes.cypher"


def ids(found: list) -> list[str]:  # type: ignore[type-arg]
    return [r.memory.id for r in found]


def test_both_stores_read_the_fields_the_neo4j_index_covers() -> None:
    text = SCHEMA.read_text(encoding="utf-8")
    covered = re.search(r"memory_text IF NOT EXISTS\s+FOR \(m:Memory\) ON EACH \[([^\]]*)\]", text)
    assert covered is not None
    assert sorted(f.strip().removeprefix("m.") for f in covered.group(1).split(",")) == sorted(
        TEXT_FIELDS
    )


def test_lucene_query_escapes_every_special_character() -> None:
    assert lucene_query(["a+b", "c:d", "(e)", 'f"g', "h\\i", "j/k"]) == (
        'a\\+b c\\:d \\(e\\) f\\"g h\\\\i j\\/k'
    )
    # Terms are lower-case words: never an operator, never a wildcard.
    assert query_terms("Who AND What OR NOT *:* x?") == ["who", "and", "what", "or", "not", "x"]
    assert query_terms("pi is 3.14, don't e-mail") == ["pi", "is", "3.14", "don't", "e", "mail"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)))) == MAX_QUERY_TERMS


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = rrf([["a", "b"], ["b", "c"]], [1.0, 2.0], k=10)
    assert fused == pytest.approx({"a": 1 / 11, "b": 1 / 12 + 2 / 11, "c": 2 / 12})


def test_another_handles_writes_and_compaction_reach_the_index(tmp_path: Path) -> None:
    path = tmp_path / "store"
    a, b = EmbeddedStore.open(path), EmbeddedStore.open(path)
    try:
        a.upsert([note("ns", "n1", "aardvark", vec(4, 1)), note("ns", "n2", "badger", vec(4, 1))])
        assert ids(a.recall_text("ns", "aardvark", 5)) == ["n1"]  # a builds its index
        assert ids(b.recall_text("ns", "badger", 5)) == ["n2"]
        b.upsert([note("ns", "n3", "capybara", vec(4, 1))])
        b.delete("ns", ["n1"])
        b.patch("ns", "n2", {"content": "dingo"})
        assert ids(a.recall_text("ns", "capybara", 5)) == ["n3"]
        assert a.recall_text("ns", "aardvark", 5) == []
        assert a.recall_text("ns", "badger", 5) == []
        assert ids(a.recall_text("ns", "dingo", 5)) == ["n2"]
        b.compact()  # a loads the new snapshot: its index is built again from it
        b.upsert([note("ns", "n4", "echidna", vec(4, 1))])
        assert sorted(ids(a.recall_text("ns", "echidna capybara", 5))) == ["n3", "n4"]
        assert a.recall_text("ns", "aardvark", 5) == []
    finally:
        a.close()
        b.close()
    with EmbeddedStore.open(path) as reopened:
        assert ids(reopened.recall_text("ns", "dingo", 5)) == ["n2"]


def test_emptied_namespace_starts_a_fresh_index() -> None:
    store = EmbeddedStore.in_memory()
    store.upsert([note("ns", "n1", "ferret", vec(4, 1))])
    assert ids(store.recall_text("ns", "ferret", 5)) == ["n1"]
    store.delete("ns", ["n1"])
    store.upsert([note("ns", "n2", "gecko", vec(4, 1))])
    assert ids(store.recall_text("ns", "gecko ferret", 5)) == ["n2"]


def test_store_check_verifies_the_keyword_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([note("ns", f"n{i}", f"heron {i}", vec(4, 1, i)) for i in range(5)])
        store.compact()
        store.upsert([note("other", "o", "ibis", vec(4, 1))])
        store.patch("ns", "n1", {"content": "jackdaw"})
        store.delete("ns", ["n2"])
    report = check_store(path)
    assert report.intact and not report.text_problems
    assert report.text_index == "5 memories in 2 namespaces"
    # An index that misses a change (here: deletes never reach it) is found out.
    monkeypatch.setattr(TextIndex, "remove", lambda self, namespace, memory_id: None)
    report = check_store(path)
    assert report.intact  # the data is sound; the derived index is reported apart
    assert report.text_index is None
    assert report.text_problems == [
        "keyword index of namespace 'ns': 1 memories indexed otherwise than they read (first 'n2')"
    ]


def test_common_terms_are_left_out_of_large_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_index, "MIN_PRUNED_POSTINGS", 3)
    index = TextIndex()
    memories = [note("ns", f"n{i}", f"the report number {i}", vec(4, 1)) for i in range(20)]
    memories.append(note("ns", "x", "the zebra report", vec(4, 1)))
    index.build("ns", memories)
    # "the" and "report" are in every memory: only "zebra" is searched.
    assert [i for i, _ in index.search("ns", ["the", "report", "zebra"], 5)] == ["x"]
    assert index.search("ns", ["the", "report"], 5) == []
    monkeypatch.setattr(text_index, "MIN_PRUNED_POSTINGS", 2000)
    assert len(index.search("ns", ["the", "report"], 5)) == 5


def test_hybrid_retrieval_finds_what_only_the_keywords_find() -> None:
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
    texts = [f"my cousin visited the museum on a rainy day number {i}" for i in range(30)]
    notes = [mem.add_note("demo", t) for t in texts]
    target = mem.add_note("demo", "Booking reference QZ7781 for the ferry")
    query = "my cousin and the ferry booking QZ7781"
    plain = mem.retrieve("demo", query, kinds=("Note",), k1=5, k2=3, lam=0.0, hybrid=False)
    assert all(h.vector_rank is None and h.fused is None for h in plain.hits)
    hybrid = mem.retrieve("demo", query, kinds=("Note",), k1=5, k2=3, lam=0.0, hybrid=True)
    top = hybrid.hits[0]
    assert top.memory.id == target.id
    assert top.text_rank == 1 and top.fused is not None
    assert [h.rank for h in hybrid.hits] == [0, 1, 2]
    assert any(h.vector_rank is not None for h in hybrid.hits)
    assert {h.memory.id for h in hybrid.hits} <= {n.id for n in [*notes, target]}


@pytest.mark.neo4j
def test_neo4j_text_index_is_checked_and_missing_one_is_scanned(
    neo4j_store: MemoryStore, namespace: str
) -> None:
    from graphmem.stores.neo4j import Neo4jStore, cypher

    store = neo4j_store
    assert isinstance(store, Neo4jStore)
    assert store.text_index_problems() == []
    dim = store.dimension or 384
    store.upsert(
        [
            note(namespace, "n1", "kookaburra call", vec(dim, 1)),
            note(namespace, "n2", "emu", vec(dim, 1)),
        ]
    )
    try:
        assert ids(store.recall_text(namespace, "kookaburra", 5)) == ["n1"]
        with store.driver.session(database=store._database) as session:
            session.run(f"DROP INDEX {cypher.FULLTEXT_INDEX}").consume()
        assert store.text_index_problems() == [
            "full-text index 'memory_text' is missing: run `graphmem schema apply`"
        ]
        found = store.recall_text(namespace, "kookaburra", 5)  # scanned instead, same answer
        assert ids(found) == ["n1"] and found[0].superseded is False
    finally:
        store.setup(dim)
        drop_namespaces(store, namespace)
    assert store.text_index_problems() == []


def test_rewritten_memories_leave_a_sound_index() -> None:
    index = TextIndex()
    index.build("ns", [note("ns", f"n{i}", f"quail {i}", vec(4, 1)) for i in range(10)])
    for round_ in range(30):  # dead rows pile up and are compacted away
        for i in range(10):
            index.put(note("ns", f"n{i}", f"quail {i} round{round_}", vec(4, 1)))
    assert index.integrity_problems("ns") == []
    assert [i for i, _ in index.search("ns", ["round29", "3"], 2)] == ["n3", "n0"]
    assert index.search("ns", ["round28"], 5) == []
    index.remove("ns", "n3")
    assert [i for i, _ in index.search("ns", ["3"], 5)] == []
    assert index.integrity_problems("ns") == []


# ---- the embedded store's saved keyword index (text-*.bm25) ------------------------------


class NoBuild:
    """Counts keyword index builds (a loaded index needs none)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        build = TextIndex.build

        def counted(index: TextIndex, namespace: str, memories: object) -> None:
            self.calls += 1
            build(index, namespace, memories)  # type: ignore[arg-type]

        monkeypatch.setattr(TextIndex, "build", counted)


def words(i: int) -> str:
    return f"a note about the kitchen and the garden number {i}"


def test_the_keyword_index_is_saved_and_loaded_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([note("ns", f"n{i}", words(i), vec(4, 1, i)) for i in range(50)])
        store.upsert([note("ns", "rare", "the locker code is XK-2291", vec(4, 0, 0, 1))])
        assert ids(store.recall_text("ns", "xk-2291", 3)) == ["rare"]  # built here
    (saved,) = path.glob("text-*.bm25")
    builds = NoBuild(monkeypatch)
    # Another handle writes after the save and saves nothing (it crashed, say): the replay
    # from the saved point brings its write in.
    with monkeypatch.context() as m, EmbeddedStore.open(path) as other:
        m.setattr(embedded_store, "save_text_indexes", lambda *a, **k: None)
        other.upsert([note("ns", "late", "parcel locker QW-5512", vec(4, 0, 1))])
    with EmbeddedStore.open(path) as store:
        assert ids(store.recall_text("ns", "xk-2291", 3)) == ["rare"]
        assert ids(store.recall_text("ns", "qw-5512 locker", 3)) == ["late", "rare"]
        store.patch("ns", "rare", {"content": "the locker code is ZT-8080"})
        store.set_embeddings("ns", {"rare": vec(4, 0, 1, 1)})  # a re-embed: the text stays
        assert store.recall_text("ns", "xk-2291", 3) == []
    assert builds.calls == 0  # loaded, never built again
    with EmbeddedStore.open(path) as store:  # the close saved the patched index
        assert ids(store.recall_text("ns", "zt-8080", 3)) == ["rare"]
        assert store.recall_text("ns", "xk-2291", 3) == []
        store.compact()  # saved again, at the start of the new generation
    assert builds.calls == 0 and [p.name for p in path.glob("text-*.bm25")] == [saved.name]
    with EmbeddedStore.open(path) as store:
        assert ids(store.recall_text("ns", "zt-8080", 3)) == ["rare"]
    assert builds.calls == 0
    report = check_store(path)
    assert report.intact and not report.index_problems and not report.text_problems
    assert report.text_files == [f"'ns': 52 memories ({saved.name})"]


def test_a_deleted_memory_is_gone_from_the_keyword_index_after_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([note("ns", f"n{i}", words(i), vec(4, 1, i)) for i in range(20)])
        store.upsert([note("ns", "gone", "invoice 4471 settled", vec(4, 1))])
        store.upsert([note("ns", "kept", "invoice 9000 open", vec(4, 1))])
        assert ids(store.recall_text("ns", "4471", 3)) == ["gone"]
    builds = NoBuild(monkeypatch)
    with EmbeddedStore.open(path) as store:  # a handle that loaded the index deletes
        store.delete("ns", ["gone"])
    with EmbeddedStore.open(path) as store:
        assert store.recall_text("ns", "4471", 3) == []
        assert ids(store.recall_text("ns", "invoice", 3)) == ["kept"]
    with monkeypatch.context() as m, EmbeddedStore.open(path) as store:
        m.setattr(embedded_store, "save_text_indexes", lambda *a, **k: None)
        store.delete("ns", ["kept"])  # not saved: the next open's replay deletes it
    with EmbeddedStore.open(path) as store:
        assert store.recall_text("ns", "invoice", 3) == []
    assert builds.calls == 0
    assert check_store(path).text_files == [
        "'ns': 20 memories (" + next(path.glob("text-*")).name + ")"
    ]


def test_a_damaged_or_stale_keyword_index_is_found_and_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphmem.cli import main as cli_main
    from graphmem.stores.embedded import fulltext_files

    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([note("ns", f"n{i}", words(i), vec(4, 1, i)) for i in range(30)])
        store.upsert([note("ns", "rare", "the ferry ticket QZ7781", vec(4, 1))])
        assert ids(store.recall_text("ns", "qz7781", 3)) == ["rare"]
    (saved,) = path.glob("text-*.bm25")
    good = saved.read_bytes()
    assert cli_main(["store", "check", str(path)]) == 0
    # A flipped byte: the checksum catches it.
    data = bytearray(good)
    data[-5] ^= 0xFF
    saved.write_bytes(bytes(data))
    report = check_store(path)
    assert report.intact and "checksum" in report.index_problems[saved]
    assert cli_main(["store", "check", str(path)]) == 1
    builds = NoBuild(monkeypatch)
    with EmbeddedStore.open(path) as store:  # ignored: built on the first search, saved
        assert ids(store.recall_text("ns", "qz7781", 3)) == ["rare"]
    assert builds.calls == 1
    assert check_store(path).index_problems == {} and saved.read_bytes() == good
    # Well-formed but wrong: an index that lacks a memory, saved under the right header.
    header, index = fulltext_files.load_file(saved)
    index.remove("ns", "rare")
    layout, body = index.dump("ns")
    fields = {k: header[k] for k in ("namespace", "generation", "offset", "wal")}
    fulltext_files.write_file(saved, {**fields, **layout}, body)
    report = check_store(path)
    assert report.index_problems[saved] == (
        "keyword index of namespace 'ns': 1 memories indexed otherwise than they read "
        "(first 'rare')"
    )
    # Of another log: ignored on open, reported by check, deleted by repair.
    fulltext_files.write_file(saved, {**fields, "wal": "00000000", **layout}, body)
    assert check_store(path).index_problems[saved] == "it was made from another log than this one"
    with EmbeddedStore.open(path) as store:
        assert ids(store.recall_text("ns", "qz7781", 3)) == ["rare"]
    assert builds.calls == 2 and check_store(path).index_problems == {}
    saved.write_bytes(b"not an index")
    from graphmem.stores.embedded.check import repair_store

    assert repair_store(path).removed_indexes == [saved] and not saved.exists()
    report = check_store(path)
    assert report.intact and not report.index_problems and report.text_files == []


@pytest.mark.neo4j
def test_neo4j_one_statement_answers_as_the_two_do(
    neo4j_store: MemoryStore, namespace: str
) -> None:
    from graphmem.models import MemoryKind, Task
    from graphmem.stores.neo4j import Neo4jStore

    store = neo4j_store
    assert isinstance(store, Neo4jStore)
    dim = store.dimension or 384
    crowd = namespace + "-crowd"
    memories = [
        note(namespace, f"n{i}", f"harbour ferry {i} timetable", vec(dim, 1, i / 3, 1))
        for i in range(12)
    ]
    memories.append(
        Task(id="t", namespace=namespace, text="ferry task", key="ferry", embedding=vec(dim, 1))
    )
    # Another namespace whose memories match the words better: the keyword channel's first
    # candidates are all of it, so it reads on; the vector channel's are mostly of it too.
    memories += [note(crowd, f"c{i}", "ferry ferry harbour", vec(dim, 1, 1)) for i in range(60)]
    store.upsert(
        memories, [Edge(namespace=namespace, kind=EdgeKind.SUPERSEDES, src="n1", dst="n2")]
    )
    try:
        for query, k, text_k, kinds, floor in [
            ("ferry timetable 3", 5, 5, [MemoryKind.NOTE], None),
            ("harbour", 4, 7, None, None),
            ("ferry", 20, 20, None, 0.5),
            ("ferry", 3, 3, [], None),
            ("nothing matches", 3, 3, None, None),
        ]:
            got_v, got_t = store.recall_hybrid(
                namespace, vec(dim, 1, 2, 1), query, k, text_k, kinds=kinds, min_sim=floor
            )
            want_v = store.recall(namespace, vec(dim, 1, 2, 1), k, kinds=kinds, min_sim=floor)
            want_t = store.recall_text(namespace, query, text_k, kinds=kinds)
            assert [(r.memory.id, round(r.sim, 9), r.superseded) for r in got_v] == [
                (r.memory.id, round(r.sim, 9), r.superseded) for r in want_v
            ], query
            assert [(r.memory.id, r.score, r.superseded) for r in got_t] == [
                (r.memory.id, r.score, r.superseded) for r in want_t
            ], query
            assert {r.memory.namespace for r in [*got_v, *got_t]} <= {namespace}
            # The same with the keyword list as ids (what hybrid recall asks).
            ids_v, ids_t = store.recall_hybrid_ids(
                namespace, vec(dim, 1, 2, 1), query, k, text_k, kinds=kinds, min_sim=floor
            )
            assert [(r.memory.id, r.sim) for r in ids_v] == [(r.memory.id, r.sim) for r in got_v]
            assert ids_t == [
                (r.memory.id, r.score, not r.superseded and r.memory.embedding is not None)
                for r in got_t
            ], query
    finally:
        drop_namespaces(store, namespace)


def test_searches_between_writes_rank_as_a_fresh_index_does() -> None:
    import random

    rng = random.Random(7)
    vocabulary = ["otter", "heron", "vole", "stoat", "badger", "marten", "hare", "finch", "wren"]
    index, live = TextIndex(), {}
    index.build("ns", [])
    for step in range(300):
        memory_id = f"n{rng.randrange(40)}"
        if rng.random() < 0.25:
            index.remove("ns", memory_id)
            live.pop(memory_id, None)
        else:
            text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 6)))
            memory = note("ns", memory_id, text, vec(4, 1))
            index.put(memory)
            live[memory_id] = memory
        if step % 7 == 0:  # searched between writes: reused scoring must follow every write
            fresh = TextIndex()
            fresh.build("ns", live.values())
            for query in (["otter"], ["vole", "wren"], vocabulary[:5]):
                assert index.search("ns", query, 5) == fresh.search("ns", query, 5)
