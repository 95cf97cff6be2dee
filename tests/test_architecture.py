"""The package's layers, checked from its imports (docs/architecture.md draws them).

Every module of ``graphmem`` belongs to one layer; a module may import its own layer and those
below, never one above — type-only and function-local imports count too, since a name used only
in an annotation is still a dependency. And no two modules import each other, directly or round
a circle. A new module must be given a layer here, which is the point: where it sits is decided,
not drifted into.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "graphmem"

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
    ("examples", ("graphmem.examples",)),
    ("command line", ("graphmem.cli", "graphmem.__main__")),
    ("public API", ("graphmem",)),
]
"""Lowest first. A prefix names a package and everything in it."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


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


def imports_of(module: str) -> Iterator[tuple[str, int]]:
    """The graphmem modules ``module`` imports, anywhere in its file, with line numbers."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "graphmem" or alias.name.startswith("graphmem."):
                    yield _existing(alias.name), node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "graphmem" and not node.module.startswith("graphmem."):
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield (sub if sub in MODULES else _existing(node.module)), node.lineno


def _existing(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in MODULES:
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert not unplaced, f"give these modules a layer in LAYERS: {unplaced}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [
        f"{module}:{line} imports {target} "
        f"({LAYERS[layer_of(module)][0]} → {LAYERS[layer_of(target)][0]})"
        for module in MODULES
        for target, line in imports_of(module)
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "\n".join(upward)


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
    """The detectors themselves: an upward edge and a circle are reported."""
    assert layer_of("graphmem.ops.build") > layer_of("graphmem.stores.base")
    assert layer_of("graphmem.memory") > layer_of("graphmem.ops.retrieve")
    assert layer_of("graphmem") == len(LAYERS) - 1
    assert sorted(map(sorted, _strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}))) == [
        ["a", "b"],
        ["c"],
    ]


@pytest.mark.parametrize(
    "old", ["graphmem.build", "graphmem.envs.agents", "graphmem.tools", "graphmem.langgraph_store"]
)
def test_pre_release_module_paths_are_gone(old: str) -> None:
    """0.1.0 was never released: the layered layout's paths are the only ones (no alias
    rewrites a real module's spec behind the user's back)."""
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
