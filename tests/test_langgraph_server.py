"""The shipped ``langgraph.json`` under the real ``langgraph dev`` server, driven over HTTP.

One server (module scope) runs on loopback with no extra flags (so its blockbuster refuses any
blocking call on the event loop), over an embedded store in a temp directory; each graph is run
through the server's HTTP API with the LangGraph SDK client, as Studio and remote agents do.
The agent graph starts a TextWorldExpress JVM (marker ``java``; skipped without Java 17).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from trajectories import TEA_TRAJECTORY as TRAJECTORY

from graphmem.stores.embedded import EmbeddedStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ("graphmem_retrieve", "graphmem_build", "graphmem_update", "graphmem_evolve")
START_TIMEOUT_S = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(self, url: str, store: Path, log: Path) -> None:
        self.url = url
        self.store = store
        self.log = log
        self.client: SyncLangGraphClient = get_sync_client(url=url)

    def run(
        self, graph: str, payload: dict[str, Any], *, thread: str | None = None, **context: Any
    ) -> dict[str, Any]:
        """One run of ``graph`` (on ``thread`` when given, else a thread of its own); a failed
        run comes back as ``{"__error__": {"error": class name, "message": ...}}``."""
        out = self.client.runs.wait(
            thread, graph, input=payload, context=context or None, raise_error=False
        )
        assert isinstance(out, dict)
        return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``langgraph dev`` serving the shipped langgraph.json (copied verbatim into a scratch
    directory beside links to ``flows/`` and ``showcase/``, so the server's ``.langgraph_api/``
    lands there)."""
    work = tmp_path_factory.mktemp("langgraph-dev")
    shutil.copy(ROOT / "langgraph.json", work / "langgraph.json")
    (work / "flows").symlink_to(ROOT / "flows", target_is_directory=True)
    (work / "showcase").symlink_to(ROOT / "showcase", target_is_directory=True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "LANGSMITH_"))}
    env |= {
        "GRAPHMEM_STORE": str(work / "store"),
        "GRAPHMEM_EMBEDDER": "hashing",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
    }
    log = work / "server.log"
    cmd = [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--no-reload"]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited ({proc.returncode}):\n{_tail(log)}")
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev did not start in {START_TIMEOUT_S:.0f}s:\n{_tail(log)}")
            time.sleep(0.5)
        yield Server(url, work / "store", log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _assistant(server: Server, graph: str) -> str:
    found = server.client.assistants.search(graph_id=graph)
    assert found, graph
    return str(found[0]["assistant_id"])


def test_every_graph_declares_its_schemas(server: Server) -> None:
    """Studio builds its input and context forms from /assistants/{id}/schemas."""
    for graph in (*GRAPHS, "graphmem_agent"):
        schemas = server.client.assistants.get_schemas(_assistant(server, graph))
        for part in ("input_schema", "output_schema", "state_schema", "context_schema"):
            assert schemas[part] is not None, (graph, part)
        context = schemas["context_schema"]["properties"]
        assert context["namespace"]["default"] == "default", graph
    retrieve = server.client.assistants.get_schemas(_assistant(server, "graphmem_retrieve"))
    assert retrieve["input_schema"]["required"] == ["query"]
    assert set(retrieve["output_schema"]["properties"]) == {"hits", "prompt", "episode_id"}
    agent = server.client.assistants.get_schemas(_assistant(server, "graphmem_agent"))
    assert agent["input_schema"]["required"] == ["seed"]
    assert {"env", "game", "policy"} <= set(agent["context_schema"]["properties"])


def test_memory_flows_over_http(server: Server) -> None:
    """build → retrieve (an episode) → update (credits it) → evolve, in one namespace."""
    ns = "http-flows"
    built = server.run("graphmem_build", {"trajectory": TRAJECTORY}, namespace=ns)
    assert "__error__" not in built, built
    [procedure_id] = built["new_memory_ids"]

    found = server.run("graphmem_retrieve", {"query": "make tea"}, namespace=ns)
    assert set(found) == {"hits", "prompt", "episode_id"}
    assert [h["memory_id"] for h in found["hits"]] == [procedure_id]
    hit = found["hits"][0]
    assert {"sim", "q", "z_sim", "z_q", "score"} <= set(hit) and hit["sim"] > 0.5
    assert "fill kettle" in found["prompt"] and found["episode_id"]

    updated = server.run(
        "graphmem_update",
        {"episode_id": found["episode_id"], "reward": 1.0, "success": True},
        namespace=ns,
    )
    assert updated["q_updates"] == {procedure_id: pytest.approx(0.55)}

    again = server.run(
        "graphmem_build", {"trajectory": {**TRAJECTORY, "task": "brew tea"}}, namespace=ns
    )
    evolved = server.run(
        "graphmem_evolve", {"new_memory_ids": again["new_memory_ids"]}, namespace=ns
    )
    assert [e["memory_id"] for e in evolved["evolution"]] == again["new_memory_ids"]

    # Another namespace sees none of it; no context at all means the "default" namespace.
    assert (
        server.run("graphmem_retrieve", {"query": "make tea"}, namespace="elsewhere")["hits"] == []
    )
    assert server.run("graphmem_retrieve", {"query": "make tea"})["hits"] == []


def test_the_served_update_credits_only_the_used_memories(server: Server) -> None:
    """A client's own tiny policy picks, from the served retrieve's hits, the procedure whose
    steps it followed; the served update credits that one only."""
    ns = "http-used"
    tea = server.run("graphmem_build", {"trajectory": TRAJECTORY}, namespace=ns)
    green = server.run(
        "graphmem_build", {"trajectory": {**TRAJECTORY, "task": "make green tea"}}, namespace=ns
    )
    [tea_id], [green_id] = tea["new_memory_ids"], green["new_memory_ids"]
    found = server.run("graphmem_retrieve", {"query": "make green tea"}, namespace=ns)
    offered = [h["memory_id"] for h in found["hits"]]
    assert set(offered) == {tea_id, green_id}

    def policy(hits: list[dict[str, Any]]) -> list[str]:  # follows the best hit only
        return [min(hits, key=lambda h: h["rank"])["memory_id"]]

    used = policy(found["hits"])
    update = {"episode_id": found["episode_id"], "reward": 1.0, "success": True}
    refused = server.run("graphmem_update", {**update, "used": ["not-offered"]}, namespace=ns)
    assert refused["__error__"]["error"] == "InvalidInput"
    assert "was not offered" in refused["__error__"]["message"]
    updated = server.run("graphmem_update", {**update, "used": used}, namespace=ns)
    assert updated["q_updates"] == {used[0]: pytest.approx(0.55)}


def test_an_invalid_namespace_fails_the_run_clearly(server: Server) -> None:
    out = server.run("graphmem_retrieve", {"query": "tea"}, namespace="no spaces allowed")
    assert out["__error__"]["error"] == "InvalidNamespace"
    assert "invalid namespace" in out["__error__"]["message"]


def test_no_blocking_call_reached_the_event_loop(server: Server) -> None:
    server.run("graphmem_retrieve", {"query": "anything"}, namespace="blocking-probe")
    assert "BlockingError" not in server.log.read_text(errors="replace")


@pytest.mark.java
def test_agent_plays_a_game_over_http(server: Server) -> None:
    """The context names the environment and the policy; memory learned is kept in the store."""
    pytest.importorskip("textworld_express")
    from showcase.envs import has_java17

    if not has_java17():
        pytest.skip("Java 17 is not installed")
    # The server is shared by this module's tests, some of which make runs fail on purpose
    # (their tracebacks are logged): only what is logged from here on is this test's.
    start = len(server.log.read_text(errors="replace"))
    context = {"namespace": "http-agent", "env": "textworld", "game": "twc", "policy": "explorer"}
    out = server.run("graphmem_agent", {"seed": 0}, **context)
    assert "__error__" not in out, out
    assert out["task"].startswith("twc ") and out["steps"] and out["episode_id"]
    assert out["steps"][0]["action"] and out["new_memory_ids"]
    assert 0.0 < out["score"] <= 1.0

    baseline = server.run("graphmem_agent", {"seed": 0}, **context, use_memory=False)
    assert baseline["steps"] and not baseline.get("new_memory_ids") and not baseline.get("hits")
    # Both runs succeeded, and their log says so only: each game's JVM was shut down once, on
    # the run's worker thread, not again by the library's __del__ wherever the garbage
    # collector ran (the event loop: BlockingError, then py4j's tracebacks; issue 47).
    gc = server.run("graphmem_retrieve", {"query": "collect"}, namespace="http-agent-gc")
    assert "__error__" not in gc
    text = server.log.read_text(errors="replace")[start:]
    for bad in ("Traceback", "BlockingError", "Py4JNetworkError", "Exception while shutting"):
        assert bad not in text, _tail(server.log, 60)


def test_served_memory_is_the_configured_store(server: Server) -> None:
    """What the runs wrote is in GRAPHMEM_STORE (read here once the server wrote it)."""
    server.run("graphmem_build", {"trajectory": TRAJECTORY}, namespace="store-check")
    store = EmbeddedStore.open(server.store)
    try:
        assert "store-check" in store.namespaces()
    finally:
        store.close()


# ---- what a client sees when something is wrong (issue 30) ---------------------------------


def test_an_unknown_context_key_fails_the_run_naming_it(server: Server) -> None:
    """LangGraph Server drops the context keys a graph's schema lacks before the run starts; a
    misspelt ``namspace`` must fail the run, not write to the shared ``default`` namespace."""
    out = server.run("graphmem_build", {"trajectory": TRAJECTORY}, namspace="typo")
    assert out["__error__"]["error"] == "ConfigError"
    assert "'namspace'" in out["__error__"]["message"]
    nested = server.run(
        "graphmem_retrieve", {"query": "tea"}, namespace="typo", retrieval={"kind": ["Note"]}
    )
    assert "'retrieval.kind'" in nested["__error__"]["message"]
    # The agent's context too (refused before any game starts, so no Java is needed).
    agent = server.run("graphmem_agent", {"seed": 0}, namespace="typo", gmae="twc")
    assert agent["__error__"]["error"] == "ConfigError"
    assert "'gmae'" in agent["__error__"]["message"]
    assert server.run("graphmem_retrieve", {"query": "make tea"}, namespace="typo")["hits"] == []


def test_two_retrieves_on_one_thread_open_two_episodes(server: Server) -> None:
    """A thread keeps a graph's state from run to run; each retrieve still opens its own
    episode unless its input names one, so a finished episode never blocks the thread."""
    ns = "http-thread"
    server.run("graphmem_build", {"trajectory": TRAJECTORY}, namespace=ns)
    thread = server.client.threads.create()["thread_id"]
    first = server.run("graphmem_retrieve", {"query": "make tea"}, thread=thread, namespace=ns)
    second = server.run("graphmem_retrieve", {"query": "make tea"}, thread=thread, namespace=ns)
    assert first["episode_id"] and second["episode_id"]
    assert first["episode_id"] != second["episode_id"]

    finished = server.run(
        "graphmem_update", {"episode_id": first["episode_id"], "reward": 1.0}, namespace=ns
    )
    assert "__error__" not in finished, finished
    third = server.run("graphmem_retrieve", {"query": "make tea"}, thread=thread, namespace=ns)
    assert "__error__" not in third, third
    assert third["episode_id"] not in (first["episode_id"], second["episode_id"])

    joined = server.run(
        "graphmem_retrieve",
        {"query": "boil water", "episode_id": second["episode_id"]},
        thread=thread,
        namespace=ns,
    )
    assert joined["episode_id"] == second["episode_id"]


def test_a_refused_update_fails_the_run_saying_why(server: Server) -> None:
    """Another reward for a finished episode is refused, as MCP's report_outcome refuses it:
    the run fails with EpisodeFinished and its message; the same reward replays."""
    ns = "http-refused"
    [procedure_id] = server.run("graphmem_build", {"trajectory": TRAJECTORY}, namespace=ns)[
        "new_memory_ids"
    ]
    episode_id = server.run("graphmem_retrieve", {"query": "make tea"}, namespace=ns)["episode_id"]
    done = server.run("graphmem_update", {"episode_id": episode_id, "reward": 1.0}, namespace=ns)
    assert done["q_updates"] == {procedure_id: pytest.approx(0.55)}
    replayed = server.run(
        "graphmem_update", {"episode_id": episode_id, "reward": 1.0}, namespace=ns
    )
    assert replayed["q_updates"] == done["q_updates"]

    refused = server.run("graphmem_update", {"episode_id": episode_id, "reward": 0.0}, namespace=ns)
    assert refused["__error__"]["error"] == "EpisodeFinished"
    message = refused["__error__"]["message"]
    assert episode_id in message and "a different reward (0) is refused" in message


def test_every_graphmem_error_reaches_the_client_with_its_message() -> None:
    """LangGraph Server shows an error's message only for some classes (ValueError, KeyError,
    RuntimeError, ...) and "An internal error occurred" for the rest: every GraphmemError,
    including those defined outside graphmem.errors, must be one it shows."""
    import importlib
    import pkgutil

    from langgraph_api.serde import default

    import graphmem
    import showcase
    from graphmem.errors import GraphmemError

    packages = [(graphmem.__path__, "graphmem."), (showcase.__path__, "showcase.")]
    for module in (m for path, prefix in packages for m in pkgutil.walk_packages(path, prefix)):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # an extra that is not installed: its errors cannot be raised
            continue
    classes: list[type[GraphmemError]] = []
    todo: list[type[GraphmemError]] = [GraphmemError]
    while todo:
        cls = todo.pop()
        classes.append(cls)
        todo.extend(cls.__subclasses__())
    assert {"StoreError", "StoreLocked", "LLMError", "EpisodeFinished", "EnvError"} <= {
        c.__name__ for c in classes
    }
    built = {
        "EmptyContent": ("query",),
        "DimensionMismatch": (384, 768),
        "EmbedderMismatch": ("ns", "hashing", "minilm"),
        "MemoryNotFound": ("m-1", "ns"),
        "ImportFormatError": (3, "not JSON"),
        "EpisodeFinished": ("e-1", "ns", 1.0, 0.0),
        "LogGap": ("log rows 4 and 6 do not follow one another", b"", 4, "gap"),
    }
    for cls in classes:
        error = cls(*built.get(cls.__name__, ("why it failed",)))
        assert default(error) == {"error": cls.__name__, "message": str(error)}, cls
        assert str(error) != "An internal error occurred"


def test_a_missing_input_field_fails_the_run_naming_it(server: Server) -> None:
    empty = server.run("graphmem_retrieve", {}, namespace="http-missing")
    assert empty["__error__"]["error"] == "InvalidInput"
    assert '"query"' in empty["__error__"]["message"]
    no_trajectory = server.run("graphmem_build", {}, namespace="http-missing")
    assert no_trajectory["__error__"]["error"] == "InvalidInput"
    assert '"trajectory"' in no_trajectory["__error__"]["message"]


def test_a_note_saved_over_mcp_is_found_by_the_served_retrieve(server: Server) -> None:
    """The served retrieve looks through the kinds MCP's search_memory does (procedures, notes
    and tips) unless the context's retrieval names others."""
    pytest.importorskip("mcp")
    from graphmem.integrations.mcp_server import MemoryTools
    from graphmem.settings import Settings

    ns = "http-mcp-note"
    env = {"GRAPHMEM_STORE": str(server.store), "GRAPHMEM_EMBEDDER": "hashing"}
    memory = Settings.from_env(env).open_memory()
    try:
        tools = MemoryTools(memory, ns)
        note = tools.save_note("The spare key is under the blue flower pot.")
        searched = tools.search_memory("where is the spare key?", open_episode=False)
    finally:
        memory.close()
    assert [h.memory_id for h in searched.hits] == [note.memory_id]
    query = {"query": "where is the spare key?", "open_episode": False}
    served = server.run("graphmem_retrieve", query, namespace=ns)
    assert [h["memory_id"] for h in served["hits"]] == [note.memory_id]
    procedures_only = server.run(
        "graphmem_retrieve", query, namespace=ns, retrieval={"kinds": ["Procedure"]}
    )
    assert procedures_only["hits"] == []


def test_a_remote_graph_called_from_a_node_runs_in_the_parents_namespace(server: Server) -> None:
    """The README's recipe: LangGraph does not forward a parent's run context to a RemoteGraph
    added as a node (it would run in ``default``), so a node calls it with the context."""
    from dataclasses import dataclass
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.pregel.remote import RemoteGraph
    from langgraph.runtime import Runtime

    @dataclass
    class AgentContext:
        namespace: str

    class State(TypedDict, total=False):
        trajectory: dict[str, Any]
        new_memory_ids: list[str]

    remote_build = RemoteGraph("graphmem_build", url=server.url)

    def remember(state: State, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        out = remote_build.invoke(
            {"trajectory": state["trajectory"]},
            context={"namespace": runtime.context.namespace},
        )
        return {"new_memory_ids": out["new_memory_ids"]}

    builder = StateGraph(State, context_schema=AgentContext)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    trajectory = {**TRAJECTORY, "task": "make tea for the remote agent"}
    out = builder.compile().invoke(
        {"trajectory": trajectory}, context=AgentContext(namespace="http-remote")
    )
    [procedure_id] = out["new_memory_ids"]
    query = {"query": "make tea for the remote agent", "open_episode": False}
    found = server.run("graphmem_retrieve", query, namespace="http-remote")
    assert [h["memory_id"] for h in found["hits"]] == [procedure_id]


def test_a_store_error_reaches_the_client_with_its_message(server: Server) -> None:
    """A StoreError raised in a served run (here: the store's log damaged by someone else
    while the server runs) reaches the HTTP client as StoreError with its message, not as "An
    internal error occurred"; ``store repair`` then puts the server's store back to work."""
    from graphmem.stores.embedded.check import repair_store

    ns = "http-store-error"
    server.run("graphmem_build", {"trajectory": TRAJECTORY}, namespace=ns)
    (wal,) = server.store.glob("wal-*.jsonl")
    offset = wal.stat().st_size
    with wal.open("ab") as f:
        f.write(b"a complete record that is no record\n")
    try:
        out = server.run("graphmem_retrieve", {"query": "make tea"}, namespace=ns)
        assert out["__error__"]["error"] == "StoreError", out
        assert f"{wal} is corrupt at byte {offset}" in out["__error__"]["message"], out
    finally:
        repair_store(server.store)
    again = server.run("graphmem_retrieve", {"query": "make tea"}, namespace=ns)
    assert "__error__" not in again and again["hits"], again
