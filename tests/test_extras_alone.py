"""Each surface needs only its own extra (issue 47): settings and the CLI's store verbs import
no LLM layer, the MCP server no LangChain, and a missing extra names the package that is
missing. Fast, in-process stand-ins for the wheel tests (``test_wheel.py``): the optional
packages are hidden from a subprocess by a meta-path finder."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

HIDE = textwrap.dedent(
    """
    import sys
    from importlib.abc import MetaPathFinder

    HIDDEN = {hidden!r}

    class Hide(MetaPathFinder):  # as if these packages were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Hide())
    """
)


def _run(hidden: set[str], body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = HIDE.format(hidden=sorted(hidden)) + textwrap.dedent(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env |= {"GRAPHMEM_STORE": str(tmp_path / "store"), "GRAPHMEM_EMBEDDER": "hashing"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env=env,
    )  # fmt: skip


OPTIONAL = {
    "langchain_core",
    "langchain_openai",
    "langgraph",
    "mcp",
    "neo4j",
    "sentence_transformers",
}


def test_settings_and_store_verbs_need_no_extra(tmp_path: Path) -> None:
    out = _run(
        OPTIONAL,
        """
        from graphmem.cli.main import main
        from graphmem.settings import Settings
        Settings.from_env({"GRAPHMEM_LLM_OUTPUT": "json"})
        assert main(["stats"]) == 2  # no store yet: one line, nothing created
        from graphmem import EmbeddedStore
        import os
        EmbeddedStore.open(os.environ["GRAPHMEM_STORE"]).close()
        assert main(["stats"]) == 0
        heavy = ("langchain_core", "langgraph", "graphmem.llm.output")
        loaded = [m for m in heavy if m in sys.modules]
        assert not loaded, loaded
        print("OK")
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("OK")


def test_the_mcp_server_needs_no_langchain() -> None:
    body = """
        import asyncio
        from graphmem import GraphMemory, HashingEmbedder
        from graphmem.integrations.mcp_server import build_server
        from graphmem.stores.embedded import EmbeddedStore
        mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
        print(len(asyncio.run(build_server(mem).list_tools())))
        """
    code = HIDE.format(hidden=["langchain_core", "langgraph"]) + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "6"  # save_notes (a list, issue 53) is the sixth


@pytest.mark.parametrize(
    ("hidden", "argv", "package", "extra"),
    [
        ({"mcp", "anyio"}, ["mcp"], "mcp", "mcp"),  # anyio fails first; mcp is what is missing
        ({"neo4j"}, ["schema", "apply"], "neo4j", "neo4j"),
        ({"langchain_core"}, ["llm", "check"], "langchain_core", "langchain"),
        ({"sentence_transformers"}, ["reembed", "-n", "x", "--embedder", "minilm"],
         "sentence_transformers", "minilm"),
    ],
)  # fmt: skip
def test_a_missing_extra_is_one_line_naming_the_missing_package(
    tmp_path: Path, hidden: set[str], argv: list[str], package: str, extra: str
) -> None:
    out = _run(
        hidden,
        f"""
        import os
        os.environ["GRAPHMEM_LLM_BASE_URL"] = "http://127.0.0.1:9/v1"
        from graphmem import EmbeddedStore, GraphMemory, HashingEmbedder
        store = EmbeddedStore.open(os.environ["GRAPHMEM_STORE"])
        mem = GraphMemory(store, embedder=HashingEmbedder())
        mem.add_note("x", "a namespace to re-embed")
        mem.close()
        if {argv!r}[0] == "schema":
            os.environ["GRAPHMEM_NEO4J_URI"] = "bolt://127.0.0.1:9"
        from graphmem.cli.main import main
        sys.exit(main({argv!r}))
        """,
        tmp_path,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert f"needs the package {package!r}" in line, line
    assert f"pip install 'graphmem[{extra}]'" in line, line
