"""What a new user of the MCP server meets (issue 55): report_outcome says what it credited
(``used=[]``: nothing), the tool descriptions and docs/mcp.md name abstention's fields and the
embedder ``[mcp]`` needs, and a server without one refuses to start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graphmem.embedding import HashingEmbedder
from graphmem.errors import MissingExtra
from graphmem.memory import GraphMemory
from graphmem.settings import Settings
from graphmem.stores.embedded import EmbeddedStore

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
NS = "mcp-honest"


def tools() -> object:
    from graphmem.integrations.mcp_server import MemoryTools

    memory = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(32))
    return MemoryTools(memory, NS)


def test_report_outcome_with_used_empty_says_it_credited_nothing() -> None:
    t = tools()
    t.save_note("The kettle is on the stove.")  # type: ignore[attr-defined]
    found = t.search_memory("the stove", kinds=["Note"])  # type: ignore[attr-defined]
    assert found.hits and found.episode_id
    out = t.report_outcome(found.episode_id, 1.0, used=[])  # type: ignore[attr-defined]
    assert out.q_updates == {} and out.credit == "used"
    assert out.summary.startswith("credited nothing: used=[] says no hit was used")
    again = t.report_outcome(found.episode_id, 1.0, used=[])  # type: ignore[attr-defined]
    assert again.replayed and "nothing credited again" in again.summary
    other = t.search_memory("the stove", kinds=["Note"])  # type: ignore[attr-defined]
    every = t.report_outcome(other.episode_id, 1.0)  # type: ignore[attr-defined]
    assert every.summary == "credited 1 memories (every hit)"


def test_the_tool_descriptions_name_abstentions_fields_and_what_used_empty_does() -> None:
    from graphmem.integrations.mcp_server import build_server

    memory = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(32))
    listed = {t.name: t for t in asyncio.run(build_server(memory).list_tools())}
    search = listed["search_memory"].description or ""
    for word in ("withheld", "baseline", "expected"):
        assert word in search, search
    used = listed["report_outcome"].inputSchema["properties"]["used"]
    assert "[] credits nothing" in str(used)


def test_docs_mcp_names_abstention_and_the_embedder_mcp_needs() -> None:
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    for needed in (
        "`withheld`",
        "`baseline`",
        "`expected`",
        "[minilm]",
        "GRAPHMEM_EMBEDDER=hashing",
    ):
        assert needed in text, needed


def test_a_server_without_its_embedder_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from graphmem.cli.mcp import _check_embedder

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    with pytest.raises(MissingExtra, match=r"graphmem\[minilm\]'.*GRAPHMEM_EMBEDDER=hashing"):
        _check_embedder(Settings.from_env({}))
    _check_embedder(Settings.from_env({"GRAPHMEM_EMBEDDER": "hashing"}))  # no model: starts
