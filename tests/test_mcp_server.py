"""``graphmem mcp`` driven by the MCP SDK's own client, as Claude Desktop or an IDE agent does:
the client spawns ``python -m graphmem mcp`` and talks to it over stdio (and, once, over
streamable HTTP). Runs on the embedded store, and on Neo4j when ``GRAPHMEM_NEO4J_URI`` is set.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from trajectories import TEA_TRAJECTORY as TRAJECTORY

from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

TOOLS = {
    "search_memory",
    "save_note",
    "save_notes",
    "build_from_trajectory",
    "report_outcome",
    "memory_history",
}


@pytest.fixture
def server_env(store: MemoryStore) -> dict[str, str]:
    """The environment ``graphmem mcp`` gets: the test's store (conftest's ``store``: an
    embedded store in a temp directory, or the shared Neo4j database, cleaned afterwards)."""
    env = {"GRAPHMEM_EMBEDDER": "hashing"}
    if isinstance(store, EmbeddedStore):
        return env | {"GRAPHMEM_STORE": str(store.path)}
    for key in ("URI", "USER", "PASSWORD", "DATABASE"):
        if value := os.environ.get(f"GRAPHMEM_NEO4J_{key}"):
            env[f"GRAPHMEM_NEO4J_{key}"] = value
    return env


def _with_server(
    env: dict[str, str], *args: str, body: Callable[[ClientSession], Awaitable[None]]
) -> None:
    """Spawn ``python -m graphmem mcp ARGS`` as an MCP client does and run ``body`` on it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "graphmem", "mcp", *args], env=env
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await body(client)

    asyncio.run(main())


def _ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def _error(result: CallToolResult) -> str:
    assert result.isError, result.structuredContent
    return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.slow
def test_every_tool_over_stdio(server_env: dict[str, str], namespace: str) -> None:
    mine, other = f"{namespace}-a", f"{namespace}-b"

    async def body(client: ClientSession) -> None:
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        search = next(t for t in listed.tools if t.name == "search_memory")
        assert search.outputSchema is not None and "hits" in search.outputSchema["properties"]

        note = _ok(
            await client.call_tool(
                "save_note",
                {"content": "Tea leaves are kept in the blue tin.", "namespace": mine},
            )
        )
        built = _ok(
            await client.call_tool(
                "build_from_trajectory", {"trajectory": TRAJECTORY, "namespace": mine}
            )
        )
        assert built["steps"] == 3 and not built["deduplicated"]

        found = _ok(
            await client.call_tool("search_memory", {"query": "make tea", "namespace": mine})
        )
        ids = {h["memory_id"] for h in found["hits"]}
        assert ids == {note["memory_id"], built["procedure_id"]}
        for hit in found["hits"]:
            assert {"sim", "q", "z_sim", "z_q", "score", "summary"} <= set(hit)
            assert hit["q"] == pytest.approx(0.5)
        assert found["episode_id"] and "fill kettle" in found["prompt"]

        # Another namespace sees nothing; a call must name one; a bad one is refused.
        elsewhere = _ok(
            await client.call_tool("search_memory", {"query": "make tea", "namespace": other})
        )
        assert elsewhere["hits"] == []
        assert "name a namespace" in _error(await client.call_tool("search_memory", {"query": "x"}))
        bad = await client.call_tool("search_memory", {"query": "x", "namespace": "no spaces"})
        assert "InvalidNamespace" in _error(bad)

        # The outcome is credited once; a repeat replays it; another reward or one out of range
        # is refused.
        episode = found["episode_id"]
        report = {"episode_id": episode, "namespace": mine, "success": True}
        first = _ok(await client.call_tool("report_outcome", {**report, "reward": 1.0}))
        assert first["q_updates"] == {i: pytest.approx(0.55) for i in ids}
        assert not first["replayed"] and first["success"] is True
        again = _ok(await client.call_tool("report_outcome", {**report, "reward": 1.0}))
        assert again["replayed"] and again["q_updates"] == first["q_updates"]
        assert "EpisodeFinished" in _error(
            await client.call_tool("report_outcome", {**report, "reward": 0.0})
        )
        assert "reward range" in _error(
            await client.call_tool("report_outcome", {**report, "reward": 7.0})
        )
        assert "MemoryNotFound" in _error(
            await client.call_tool("report_outcome", {**report, "namespace": other, "reward": 1.0})
        )

        history = _ok(
            await client.call_tool(
                "memory_history", {"memory_id": note["memory_id"], "namespace": mine}
            )
        )
        assert history["q"] == pytest.approx(0.55) and history["uses"] == 1
        assert [e["episode_id"] for e in history["episodes"]] == [episode]
        assert "blue tin" in history["text"]
        assert "MemoryNotFound" in _error(
            await client.call_tool(
                "memory_history", {"memory_id": note["memory_id"], "namespace": other}
            )
        )

    _with_server(server_env, body=body)


@pytest.mark.slow
def test_report_outcome_credits_only_the_hits_the_agent_used(
    server_env: dict[str, str], namespace: str
) -> None:
    """A client's own tiny policy reads the hits and reports the ones it used: the episode
    keeps every hit offered, and only the used ones are credited."""

    def policy(hits: list[dict[str, Any]]) -> list[str]:  # acts on what mentions the kettle
        return [h["memory_id"] for h in hits if "kettle" in h["summary"]]

    async def body(client: ClientSession) -> None:
        mine = {"namespace": namespace}
        kettle = _ok(
            await client.call_tool("save_note", {"content": "The kettle is on the stove.", **mine})
        )
        cat = _ok(
            await client.call_tool("save_note", {"content": "The cat naps by the stove.", **mine})
        )
        found = _ok(await client.call_tool("search_memory", {"query": "the stove", **mine}))
        assert {h["memory_id"] for h in found["hits"]} == {kettle["memory_id"], cat["memory_id"]}
        used = policy(found["hits"])
        assert used == [kettle["memory_id"]]
        report = {"episode_id": found["episode_id"], "reward": 1.0, **mine}
        stranger = await client.call_tool(
            "report_outcome", {**report, "used": [*used, "not-a-hit"]}
        )
        assert "was not offered 'not-a-hit'" in _error(stranger)
        first = _ok(await client.call_tool("report_outcome", {**report, "used": used}))
        assert first["q_updates"] == {kettle["memory_id"]: pytest.approx(0.55)}
        assert first["credit"] == "used" and not first["replayed"]
        again = _ok(await client.call_tool("report_outcome", {**report, "used": used}))
        assert again["replayed"] and again["q_updates"] == first["q_updates"]
        history = _ok(
            await client.call_tool("memory_history", {"memory_id": cat["memory_id"], **mine})
        )
        assert history["q"] == pytest.approx(0.5) and history["uses"] == 0
        assert history["episodes"] == []

    _with_server(server_env, body=body)


@pytest.mark.slow
def test_a_server_fixed_to_one_namespace(server_env: dict[str, str], namespace: str) -> None:
    mine, other = f"{namespace}-fixed", f"{namespace}-other"

    async def seed(client: ClientSession) -> None:
        _ok(await client.call_tool("save_note", {"content": "Secret: 42.", "namespace": other}))

    async def body(client: ClientSession) -> None:
        saved = _ok(await client.call_tool("save_note", {"content": "The cat is fed at six."}))
        assert saved["namespace"] == mine
        found = _ok(await client.call_tool("search_memory", {"query": "secret cat"}))
        assert [h["memory_id"] for h in found["hits"]] == [saved["memory_id"]]
        same = await client.call_tool("search_memory", {"query": "cat", "namespace": mine})
        assert _ok(same)["namespace"] == mine
        refused = await client.call_tool("search_memory", {"query": "x", "namespace": other})
        assert f"serves namespace {mine!r} only" in _error(refused)

    _with_server(server_env, body=seed)
    _with_server(server_env, "--namespace", mine, body=body)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_streamable_http_transport(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "GRAPHMEM_EMBEDDER": "hashing", "GRAPHMEM_STORE": str(tmp_path / "s")}
    env.pop("GRAPHMEM_NEO4J_URI", None)
    cmd = [sys.executable, "-m", "graphmem", "mcp", "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--namespace", "web"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "graphmem mcp --transport http did not start"
                time.sleep(0.2)

        async def main() -> None:
            async with (
                streamable_http_client(url) as (read, write, _),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                _ok(await client.call_tool("save_note", {"content": "Deploys happen on Friday."}))
                found = _ok(await client.call_tool("search_memory", {"query": "when deploys"}))
                assert found["namespace"] == "web" and len(found["hits"]) == 1

        asyncio.run(main())
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.slow
def test_tools_in_a_langgraph_agent_via_langchain_mcp_adapters(tmp_path: Path) -> None:
    """The README's recipe: MCP tools as LangChain tools in a LangGraph ToolNode. The model's
    turns are scripted (no LLM here): save a note, then search for it."""
    from langchain_core.messages import AIMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    client = MultiServerMCPClient(
        {
            "graphmem": {
                "transport": "stdio",
                "command": sys.executable,
                "args": ["-m", "graphmem", "mcp", "--namespace", "agent-1"],
                "env": {"GRAPHMEM_STORE": str(tmp_path / "s"), "GRAPHMEM_EMBEDDER": "hashing"},
            }
        }
    )

    def call(name: str, args: dict[str, Any]) -> AIMessage:
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": name}])

    async def main() -> None:
        tools = await client.get_tools()
        assert {t.name for t in tools} == TOOLS
        builder = StateGraph(MessagesState)
        builder.add_node("tools", ToolNode(tools))
        builder.add_edge(START, "tools")
        builder.add_edge("tools", END)
        node = builder.compile()
        saved = await node.ainvoke(
            {"messages": [call("save_note", {"content": "The wifi password is on the fridge."})]}
        )
        assert "agent-1" in str(saved["messages"][-1].content)
        found = await node.ainvoke(
            {"messages": [call("search_memory", {"query": "where is the wifi password?"})]}
        )
        reply = found["messages"][-1]
        assert reply.status == "success" and "on the fridge" in str(reply.content)

    asyncio.run(main())


def test_cli_refuses_a_bad_namespace_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "GRAPHMEM_STORE": str(tmp_path / "s")}
    out = subprocess.run(
        [sys.executable, "-m", "graphmem", "mcp", "--namespace", "no spaces"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2
    assert (
        out.stderr.startswith("graphmem: error: --namespace: invalid namespace")
        and out.stderr.count("\n") == 1
    )


@pytest.mark.slow
def test_save_notes_saves_a_list_in_order_or_nothing(
    server_env: dict[str, str], namespace: str
) -> None:
    async def body(client: ClientSession) -> None:
        mine = {"namespace": namespace}
        given = [
            {"content": "The kettle is on the stove."},
            {"content": "The cat is fed at six.", "tags": ["cat"], "valid_at": "2024-05-03"},
        ]
        saved = _ok(await client.call_tool("save_notes", {"notes": given, **mine}))
        assert [n["namespace"] for n in saved["notes"]] == [namespace, namespace]
        assert saved["notes"][1]["tags"] == ["cat"]
        found = _ok(await client.call_tool("search_memory", {"query": "feeding the cat", **mine}))
        assert saved["notes"][1]["memory_id"] in {h["memory_id"] for h in found["hits"]}
        bad = await client.call_tool(
            "save_notes", {"notes": [{"content": "A new fact."}, {"content": "  "}], **mine}
        )
        assert "notes[1]" in _error(bad)
        late = await client.call_tool(
            "save_notes", {"notes": [{"content": "x", "valid_at": "last tuesday"}], **mine}
        )
        assert "notes[0]" in _error(late) and "valid_at" in _error(late)
        found = _ok(await client.call_tool("search_memory", {"query": "a new fact", **mine}))
        assert len(found["hits"]) == 2  # the two saved before; nothing of the bad call
        # A fact said again with a new value: the newer note first, the older one marked.
        said = [
            {"content": "Tom walks the dog at six.", "valid_at": "2024-05-03"},
            {"content": "Tom walks the dog at seven now.", "valid_at": "2024-09-01"},
        ]
        old, new = _ok(await client.call_tool("save_notes", {"notes": said, **mine}))["notes"]
        found = _ok(
            await client.call_tool("search_memory", {"query": "when does Tom walk the dog", **mine})
        )
        first, second = found["hits"][:2]
        assert (first["memory_id"], first["newer_than"]) == (new["memory_id"], old["memory_id"])
        assert (second["memory_id"], second["updated_by"]) == (old["memory_id"], new["memory_id"])

    _with_server(server_env, body=body)
