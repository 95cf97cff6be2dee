"""The package's layers, checked from its imports (docs/architecture.md draws them).

Every module of ``graphmem`` belongs to one layer; a module may import its own layer and those
below, never one above — type-only and function-local imports count too, since a name used only
in an annotation is still a dependency. ``graphmem`` imports none of the checkout's top-level
folders (``showcase``, ``flows``, ``bench``, ``tests``: the installed wheel has only ``graphmem``).
And no two modules of ``graphmem/``, ``showcase/``, ``flows/`` and ``bench/`` import each other,
directly or round a circle.
A new module must be given a layer here, which is the point: where it sits is decided, not
drifted into.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "graphmem"
CHECKED = ("graphmem", "showcase", "flows", "bench")
"""The folders whose modules the import checks read."""

TOP_LEVEL = frozenset(
    p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "graphmem"
) | frozenset(p.stem for p in ROOT.glob("*.py"))
"""What ``graphmem`` must never import: any folder or module at the checkout's top level."""

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "vocabulary",
        (
            "graphmem.errors",
            "graphmem.models",
            "graphmem.config",
            "graphmem.keywords",
            "graphmem.embedding",
            "graphmem.jsonschemas",
            "graphmem.commandline",
            "graphmem.extras",
            "graphmem.coroutines",
        ),
    ),
    ("Neo4j launcher", ("graphmem.launcher",)),
    ("stores and LLM steps", ("graphmem.stores", "graphmem.llm")),
    ("operations", ("graphmem.ops",)),
    ("facade", ("graphmem.memory",)),
    (
        "surfaces",
        (
            "graphmem.settings",
            "graphmem.agents",
            "graphmem.integrations",
            "graphmem.viz",
            "graphmem.testing",
        ),
    ),
    ("flows", ("graphmem.flows",)),
    ("command line", ("graphmem.cli", "graphmem.__main__")),
    ("public API", ("graphmem",)),
]
"""Lowest first. A prefix names a package and everything in it."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {
    module_name(p): p for folder in CHECKED for p in sorted((ROOT / folder).rglob("*.py"))
}
"""Every module of graphmem/, showcase/, flows/ and bench/."""

PACKAGE_MODULES = sorted(m for m in MODULES if m == "graphmem" or m.startswith("graphmem."))


def layer_of(module: str) -> int:
    """The index of ``module``'s layer: the longest matching prefix decides."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    if best is None:
        raise KeyError(module)
    return best[1]


def imported_names(source: str, module: str) -> Iterator[tuple[str, int]]:
    """Every module name ``source`` (the text of ``module``) imports, anywhere in it, with line
    numbers; relative imports are resolved, ``from a import b`` gives ``a.b``."""
    is_package = MODULES.get(module, Path()).name == "__init__.py"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            for alias in node.names:
                yield f"{base}.{alias.name}" if base else alias.name, node.lineno


def imports_of(module: str) -> Iterator[tuple[str, int]]:
    """The checked modules (and top-level folders) ``module`` imports, with line numbers."""
    roots = {*CHECKED, *TOP_LEVEL}
    for name, line in imported_names(MODULES[module].read_text(encoding="utf-8"), module):
        if name.split(".")[0] in roots:
            yield _existing(name), line


def _existing(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in PACKAGE_MODULES:
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert not unplaced, f"give these modules a layer in LAYERS: {unplaced}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [
        f"{module}:{line} imports {target} "
        f"({LAYERS[layer_of(module)][0]} → {LAYERS[layer_of(target)][0]})"
        for module in PACKAGE_MODULES
        for target, line in imports_of(module)
        if target.split(".")[0] == "graphmem" and layer_of(target) > layer_of(module)
    ]
    assert not upward, "\n".join(upward)


STORE_PACKAGES = ("graphmem.stores.embedded", "graphmem.stores.neo4j")
"""The stores under the contract; what they share (the contract, its words and text index) sits
in ``graphmem/stores/`` beside ``base.py``."""


def _store_of(module: str) -> str | None:
    return next((p for p in STORE_PACKAGES if module == p or module.startswith(p + ".")), None)


def test_no_store_imports_another_and_the_contract_imports_none() -> None:
    """A store reads the contract's modules, never another store's; the contract's modules
    (``stores/base.py`` and its neighbours) import no store."""
    crossing = [
        f"{module}:{line} imports {target}"
        for module in PACKAGE_MODULES
        if module.startswith("graphmem.stores.")
        for target, line in imports_of(module)
        if _store_of(target) is not None and _store_of(target) != _store_of(module)
    ]
    assert not crossing, "\n".join(crossing)
    assert _store_of("graphmem.stores.neo4j.ops") == "graphmem.stores.neo4j"
    assert _store_of("graphmem.stores.words") is None


def test_the_package_imports_no_top_level_folder() -> None:
    """The wheel ships ``graphmem`` only: an import of ``flows``, ``bench`` or ``tests`` from it
    works in the checkout and fails once installed."""
    outside = [
        f"{module}:{line} imports {target}"
        for module in PACKAGE_MODULES
        for target, line in imports_of(module)
        if target.split(".")[0] != "graphmem"
    ]
    assert not outside, "\n".join(outside)


def test_the_library_imports_nothing_from_the_showcase() -> None:
    """The games, agents, demo and sample graph live in ``showcase/`` (not in the wheel): no
    module of ``graphmem``, however deep or lazily, imports it, and no ``graphmem.examples`` is
    left to import."""
    assert "showcase" in TOP_LEVEL and (ROOT / "showcase" / "demo.py").is_file()
    found = [
        f"{module}:{line} imports {name}"
        for module in PACKAGE_MODULES
        for name, line in imported_names(MODULES[module].read_text(encoding="utf-8"), module)
        if name.split(".")[0] == "showcase" or name.startswith("graphmem.examples")
    ]
    assert not found, "\n".join(found)
    assert not (PACKAGE / "examples").exists() and not (PACKAGE / "viz" / "sample.py").exists()


def test_no_import_circles() -> None:
    graph = {
        m: {t for t, _ in imports_of(m) if t != m and not _is_own_package(m, t)} for m in MODULES
    }
    circles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert not circles, f"modules that import each other (round a circle): {circles}"


def _is_own_package(module: str, target: str) -> bool:
    """A module importing its own package's ``__init__`` (which re-exports it) is no circle."""
    return module.startswith(target + ".")


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (the graph is small, but recursion limits are not)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(component)
    return found


def test_the_checks_catch_what_they_claim() -> None:
    """The detectors themselves: an upward edge, a top-level import and a circle are reported."""
    assert {"showcase", "flows", "bench", "tests"} <= TOP_LEVEL
    assert {"graphmem.flows.server", "bench.learning", "flows.server", "showcase.demo"} <= set(
        MODULES
    )
    source = "def f():\n    from flows.server import agent\n    from . import state\n"
    assert list(imported_names(source, "graphmem.flows.agent")) == [
        ("flows.server.agent", 2),
        ("graphmem.flows.state", 3),
    ]
    assert layer_of("graphmem.ops.build") > layer_of("graphmem.stores.base")
    assert layer_of("graphmem.memory") > layer_of("graphmem.ops.retrieve")
    assert layer_of("graphmem") == len(LAYERS) - 1
    assert sorted(map(sorted, _strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}))) == [
        ["a", "b"],
        ["c"],
    ]


@pytest.mark.parametrize(
    "old",
    [
        "graphmem.build",
        "graphmem.envs.agents",
        "graphmem.tools",
        "graphmem.langgraph_store",
        "graphmem.examples",
        "graphmem.viz.sample",
    ],
)
def test_pre_release_module_paths_are_gone(old: str) -> None:
    """0.1.0 was never released: the layered layout's paths are the only ones (no alias
    rewrites a real module's spec behind the user's back)."""
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_old_home_of_the_words_still_answers_with_a_warning() -> None:
    """Keyword search's words and index left ``stores/embedded/fulltext.py`` for the contract's
    side (issue 54); the old names resolve, with a DeprecationWarning, for one release."""
    from graphmem.stores import text_index, words
    from graphmem.stores.embedded import fulltext

    with pytest.warns(DeprecationWarning, match="moved to graphmem.stores.words.query_terms"):
        assert fulltext.query_terms is words.query_terms
    with pytest.warns(DeprecationWarning, match="graphmem.stores.text_index.TextIndex"):
        from graphmem.stores.embedded.fulltext import TextIndex
    assert TextIndex is text_index.TextIndex
    with pytest.raises(AttributeError):
        fulltext.no_such_name  # noqa: B018


def test_the_game_step_is_an_example_not_a_memory_operation() -> None:
    """Choosing a text-game action is what the --llm example agent does with a chat model; the
    library's LLM layer holds memory operations only (issue 29)."""
    import graphmem.llm as llm
    from graphmem.llm.client import MemoryLLM
    from showcase import llm_actions

    assert not hasattr(MemoryLLM, "choose_action")
    assert "match_action" not in llm.__all__ and "ActionChoice" not in llm.__all__
    assert llm_actions.match_action("> Open Fridge.", ["open fridge"]) == "open fridge"
