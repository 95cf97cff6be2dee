"""The store knows its embedder: each namespace records the embedder that made its vectors,
another embedder is refused in one line, ``reembed`` (library and CLI) switches a namespace to
another embedder, and exports carry the record. Run on both stores."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from graphmem import GraphMemory, reembed
from graphmem.embedding import (
    EmbedderRecord,
    HashingEmbedder,
    Matrix,
    SentenceTransformerEmbedder,
    fingerprint,
)
from graphmem.errors import DimensionMismatch, EmbedderMismatch, ImportFormatError
from graphmem.models import Note
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

FACTS = [
    "The spare key is under the blue flower pot by the back door.",
    "The wifi password is written on the fridge magnet.",
    "Grandma's birthday is on the third of March.",
    "The car battery was replaced in October.",
]
QUERY = "where is the spare key"


class ShuffledHashing:
    """Another embedder of the same dimension: the hashing embedder's vectors with their
    coordinates permuted. Retrieval works with it alone, but its vectors are not the hashing
    embedder's, which is exactly the silent mix-up the record catches."""

    def __init__(self, dimension: int = 384) -> None:
        self._inner = HashingEmbedder(dimension)
        self._order = np.random.default_rng(7).permutation(dimension)

    @property
    def name(self) -> str:
        return f"shuffled-hashing-{self._inner.dimension}"

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def embed(self, texts: Sequence[str]) -> Matrix:
        return self._inner.embed(texts)[:, self._order]


class FailsAfter:
    """An embedder that fails on its n-th call (a crash half way through a re-embed)."""

    def __init__(self, inner: HashingEmbedder, calls: int) -> None:
        self._inner, self._left = inner, calls
        self.name, self.dimension = inner.name, inner.dimension

    def embed(self, texts: Sequence[str]) -> Matrix:
        self._left -= 1
        if self._left < 0:
            raise KeyboardInterrupt
        return self._inner.embed(texts)


def write_facts(store: MemoryStore, namespace: str, embedder: object) -> list[Note]:
    mem = GraphMemory(store, embedder=embedder)  # type: ignore[arg-type]
    return [mem.add_note(namespace, fact) for fact in FACTS]


def top_hit(store: MemoryStore, namespace: str, embedder: object) -> str:
    mem = GraphMemory(store, embedder=embedder)  # type: ignore[arg-type]
    hits = mem.retrieve(namespace, QUERY, kinds=("Note",)).hits
    return hits[0].memory.content


def assert_refused(store: MemoryStore, namespace: str, embedder: object, *names: str) -> str:
    """Retrieving with ``embedder`` is refused in one line naming ``names``; nothing changed."""
    before = sorted((m.id, m.embedding) for m in store.iter_nodes(namespace))
    record = store.embedder_record(namespace)
    mem = GraphMemory(store, embedder=embedder)  # type: ignore[arg-type]
    with pytest.raises(EmbedderMismatch) as caught:
        mem.retrieve(namespace, QUERY, kinds=("Note",))
    with pytest.raises(EmbedderMismatch):
        mem.add_note(namespace, "a note written with the wrong embedder")
    message = str(caught.value)
    assert "\n" not in message
    for name in names:
        assert name in message
    assert "graphmem reembed" in message
    assert sorted((m.id, m.embedding) for m in store.iter_nodes(namespace)) == before
    assert store.embedder_record(namespace) == record
    return message


def test_the_first_write_records_the_embedder(store: MemoryStore, namespace: str) -> None:
    assert store.embedder_record(namespace) is None
    write_facts(store, namespace, HashingEmbedder(384))
    record = store.embedder_record(namespace)
    assert record is not None
    assert (record.name, record.dimension, record.pending) == ("hashing-384", 384, False)
    assert record.matches(fingerprint(HashingEmbedder(384)))
    assert not record.matches(fingerprint(ShuffledHashing()))
    assert top_hit(store, namespace, HashingEmbedder(384)) == FACTS[0]


def test_another_embedder_is_refused_and_reembed_switches(
    store: MemoryStore, namespace: str
) -> None:
    notes = write_facts(store, namespace, ShuffledHashing())
    store.update_utility(namespace, [notes[0].id], 1.0, 0.5)
    assert_refused(store, namespace, HashingEmbedder(384), "shuffled-hashing-384", "hashing-384")

    seen: list[tuple[int, int]] = []
    result = reembed(
        store, namespace, HashingEmbedder(384), batch_size=3, progress=lambda *p: seen.append(p)
    )
    assert result.reembedded == len(FACTS)
    assert result.before is not None and result.before.name == "shuffled-hashing-384"
    assert seen == [(3, 4), (4, 4)]
    assert top_hit(store, namespace, HashingEmbedder(384)) == FACTS[0]
    # Only the vectors changed: content, utility and ids are as they were.
    after = {m.id: m for m in store.iter_nodes(namespace)}
    assert {n.id for n in notes} == set(after)
    assert after[notes[0].id].q == pytest.approx(notes[0].q + 0.5 * (1.0 - notes[0].q))
    assert after[notes[0].id].uses == 1
    assert np.allclose(
        after[notes[1].id].embedding, HashingEmbedder(384).embed([notes[1].embed_text()])[0]
    )
    assert_refused(store, namespace, ShuffledHashing(), "shuffled-hashing-384")


def test_namespaces_keep_their_own_embedder(store: MemoryStore, namespace: str) -> None:
    other = f"{namespace}-other"
    write_facts(store, namespace, HashingEmbedder(384))
    write_facts(store, other, ShuffledHashing())
    assert top_hit(store, namespace, HashingEmbedder(384)) == FACTS[0]
    assert top_hit(store, other, ShuffledHashing()) == FACTS[0]
    assert_refused(store, other, HashingEmbedder(384), "shuffled-hashing-384")


def test_an_interrupted_reembed_refuses_every_embedder_until_run_again(
    store: MemoryStore, namespace: str
) -> None:
    write_facts(store, namespace, ShuffledHashing())
    with pytest.raises(KeyboardInterrupt):
        # The first call embeds the fingerprint probe, the second the first batch.
        reembed(store, namespace, FailsAfter(HashingEmbedder(384), 2), batch_size=2)
    record = store.embedder_record(namespace)
    assert record is not None and record.pending
    for embedder in (ShuffledHashing(), HashingEmbedder(384)):
        message = assert_refused(store, namespace, embedder, "hashing-384")
        assert "unfinished" in message
    reembed(store, namespace, HashingEmbedder(384), batch_size=2)
    assert top_hit(store, namespace, HashingEmbedder(384)) == FACTS[0]


def test_a_store_without_a_record_adopts_the_first_embedder(
    store: MemoryStore, namespace: str
) -> None:
    """Stores written before embedders were recorded keep working: the first use records."""
    write_facts(store, namespace, HashingEmbedder(384))
    store.record_embedder(namespace, None, replace=True)  # as written by an older graphmem
    assert store.embedder_record(namespace) is None
    assert top_hit(store, namespace, HashingEmbedder(384)) == FACTS[0]
    record = store.embedder_record(namespace)
    assert record is not None and record.name == "hashing-384"
    assert_refused(store, namespace, ShuffledHashing(), "hashing-384")


def test_reembed_keeps_the_store_dimension(store: MemoryStore, namespace: str) -> None:
    write_facts(store, namespace, HashingEmbedder(384))
    with pytest.raises(DimensionMismatch):
        reembed(store, namespace, HashingEmbedder(64))
    record = store.embedder_record(namespace)
    assert record is not None and record.name == "hashing-384" and not record.pending


def test_minilm_store_refuses_hashing_and_reembed_fixes_it(
    store: MemoryStore, namespace: str, minilm: SentenceTransformerEmbedder
) -> None:
    """The README's mix-up: a store written with MiniLM, opened with the hashing embedder."""
    write_facts(store, namespace, minilm)
    message = assert_refused(store, namespace, HashingEmbedder(384), "all-MiniLM-L6-v2")
    assert "hashing-384" in message
    reembed(store, namespace, HashingEmbedder(384))
    assert top_hit(store, namespace, HashingEmbedder(384)) == FACTS[0]
    assert_refused(store, namespace, minilm, "all-MiniLM-L6-v2", "hashing-384")


# ---- export and import ---------------------------------------------------------------------


def export_lines(store: MemoryStore, namespace: str) -> list[str]:
    out = io.StringIO()
    store.export_jsonl(out, namespace)
    return out.getvalue().splitlines()


def test_exports_carry_the_record_and_imports_check_it(store: MemoryStore, namespace: str) -> None:
    write_facts(store, namespace, ShuffledHashing())
    lines = export_lines(store, namespace)
    header = json.loads(lines[0])
    recorded = EmbedderRecord.from_json(header["embedders"][namespace])
    assert recorded.name == "shuffled-hashing-384"

    # Into an empty namespace: the record comes along, and only that embedder may use it.
    copy = f"{namespace}-copy"
    store.import_jsonl(lines, namespace=copy)
    copied = store.embedder_record(copy)
    assert copied is not None and copied.matches(recorded)
    assert top_hit(store, copy, ShuffledHashing()) == FACTS[0]
    assert_refused(store, copy, HashingEmbedder(384), "shuffled-hashing-384")

    # Into a namespace recorded with another embedder: refused, nothing written.
    other = f"{namespace}-other"
    write_facts(store, other, HashingEmbedder(384))
    before = sorted(m.id for m in store.iter_nodes(other))
    with pytest.raises(EmbedderMismatch, match="shuffled-hashing-384"):
        store.import_jsonl(lines, namespace=other)
    assert sorted(m.id for m in store.iter_nodes(other)) == before

    # An export from before records existed imports unchecked.
    old = dict(header)
    del old["embedders"]
    legacy = f"{namespace}-legacy"
    store.import_jsonl([json.dumps(old), *lines[1:]], namespace=legacy)
    assert store.embedder_record(legacy) is None


def test_a_bad_embedder_record_in_an_import_is_refused(store: MemoryStore, namespace: str) -> None:
    write_facts(store, namespace, HashingEmbedder(384))
    lines = export_lines(store, namespace)
    header = json.loads(lines[0])
    header["embedders"][namespace]["probe"] = [1.0, 2.0]
    with pytest.raises(ImportFormatError, match="line 1: bad embedder record"):
        store.import_jsonl([json.dumps(header), *lines[1:]], namespace=f"{namespace}-x")
    assert store.embedder_record(f"{namespace}-x") is None


# ---- the embedded store keeps the record durably ------------------------------------------


def test_the_embedded_record_survives_reopening_and_compaction(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as first:
        write_facts(first, "ns", ShuffledHashing())
    with EmbeddedStore.open(path) as second:  # replayed from the write-ahead log
        assert_refused(second, "ns", HashingEmbedder(384), "shuffled-hashing-384")
        second.compact()
    with EmbeddedStore.open(path) as third:  # loaded from the snapshot
        record = third.embedder_record("ns")
        assert record is not None and record.name == "shuffled-hashing-384"
        reembed(third, "ns", HashingEmbedder(384))
    with EmbeddedStore.open(path) as fourth:
        assert top_hit(fourth, "ns", HashingEmbedder(384)) == FACTS[0]


# ---- the command line ----------------------------------------------------------------------


def cli_env(store: MemoryStore, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    if isinstance(store, EmbeddedStore):
        env["GRAPHMEM_STORE"] = str(tmp_path / "store")
    else:
        for key in ("URI", "USER", "PASSWORD", "DATABASE"):
            if f"GRAPHMEM_NEO4J_{key}" in os.environ:
                env[f"GRAPHMEM_NEO4J_{key}"] = os.environ[f"GRAPHMEM_NEO4J_{key}"]
    return env


def graphmem(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphmem", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_graphmem_reembed_command(store: MemoryStore, namespace: str, tmp_path: Path) -> None:
    write_facts(store, namespace, ShuffledHashing())
    env = cli_env(store, tmp_path)
    env["GRAPHMEM_EMBEDDER"] = "hashing"
    done = graphmem(env, "reembed", "--namespace", namespace, "--batch-size", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"{namespace}: 4 memories re-embedded with hashing-384 (384-d) "
        "(was: shuffled-hashing-384 (384-d))"
    )
    assert done.stderr.splitlines() == [
        f"{namespace}: re-embedded 2/4",
        f"{namespace}: re-embedded 4/4",
    ]
    assert top_hit(store, namespace, HashingEmbedder(384)) == FACTS[0]
    assert_refused(store, namespace, ShuffledHashing(), "hashing-384")

    usage = graphmem(env, "reembed")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1, usage.stderr
    assert "--namespace" in usage.stderr and "Traceback" not in usage.stderr

    helped = graphmem(env, "reembed", "--help")
    assert helped.returncode == 0 and "GRAPHMEM_EMBEDDER" in helped.stdout


def test_the_langgraph_store_checks_the_embedder(store: MemoryStore, namespace: str) -> None:
    from graphmem.integrations.langgraph_store import GraphMemoryStore

    root = f"{namespace}-lg"
    GraphMemoryStore(GraphMemory(store, embedder=ShuffledHashing()), root=root).put(
        ("users", "u1"), "key", {"text": FACTS[0]}
    )
    other = GraphMemoryStore(GraphMemory(store, embedder=HashingEmbedder(384)), root=root)
    with pytest.raises(EmbedderMismatch, match="shuffled-hashing-384"):
        other.search(("users",), query=QUERY)
    with pytest.raises(EmbedderMismatch, match="shuffled-hashing-384"):
        other.put(("users", "u1"), "other", {"text": FACTS[1]})
    assert [i.key for i in other.search(("users",))] == ["key"]  # no query: no vectors used
