"""The installable package (issue 29): the wheel holds ``graphmem`` only, and installed with no
extras in a fresh venv it runs the README's example with an embedder the caller passes; a
feature whose extra is missing fails in one line naming the extra."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

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
