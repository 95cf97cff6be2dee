"""A namespace and a reward are checked once, where they enter (docs/architecture.md, "Where
input is checked"): one search and one report_outcome, through the API and through the MCP
tools, each check the caller's namespace and reward exactly once, and no layer below the
surfaces (ops/, stores/) checks either again.

The counter (a profiler, so no import or alias can hide a check) watches the checks
themselves: every call of :func:`graphmem.models.check_namespace`, every other use of
:data:`graphmem.models.NAMESPACE_RE`, and every call of
:meth:`graphmem.config.MemoryConfig.check_reward`. Each is put down to the first graphmem module
on its call stack outside the two that define them (a model's field is checked for the code
that builds the model). A store reading back its own records (the embedded store's log record,
a Neo4j row) checks what it reads, a file and a database being input too: those checks are
told apart, and the embedded store's held to one a log record.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, cast

import pytest

from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.errors import InvalidInput, InvalidNamespace, InvalidReward
from graphmem.integrations.mcp_server import build_server
from graphmem.memory import GraphMemory
from graphmem.models import NAMESPACE_RE, Namespace, check_namespace
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

PACKAGE = str(Path(check_namespace.__code__.co_filename).parent) + "/"
DEFINERS = {"models.py", "config.py"}
"""Where the checks live: a check is put down to the first module above these."""

SURFACES = ("memory.py", "integrations/", "flows/", "cli/", "viz/", "agents.py")
"""The boundary: where input enters graphmem."""

RECORD_READERS = {
    ("stores/embedded/state.py", "decode_change"),
    ("stores/neo4j/rows.py", "to_memory"),
    ("stores/neo4j/rows.py", "read_memory"),
    ("stores/neo4j/rows.py", "to_edge"),
}
"""A store reading back what it wrote: (module, function)."""

REWARD_CHECK = MemoryConfig.check_reward.__code__
NAMESPACE_CHECK = check_namespace.__code__


@dataclass
class Checks:
    """The namespace and reward checks one call made, by the module that asked for them."""

    namespace: Counter[str] = field(default_factory=Counter)
    reward: Counter[str] = field(default_factory=Counter)

    def at_boundary(self, kind: str) -> int:
        counts: Counter[str] = getattr(self, kind)
        return sum(n for where, n in counts.items() if where.startswith(SURFACES))

    def below(self, kind: str) -> dict[str, int]:
        counts: Counter[str] = getattr(self, kind)
        return {
            where: n
            for where, n in counts.items()
            if not where.startswith(SURFACES) and not where.startswith("record:")
        }

    def records(self) -> int:
        return sum(n for where, n in self.namespace.items() if where.startswith("record:"))


def _asker(frame: FrameType | None) -> str:
    """The graphmem module that asked for the check made in ``frame``'s caller chain."""
    while frame is not None:
        path = frame.f_code.co_filename
        if frame.f_code.co_name.startswith("<"):  # a comprehension: its function asked
            pass
        elif path.startswith(PACKAGE):
            module = path[len(PACKAGE) :]
            if (module, frame.f_code.co_qualname.split(".")[0]) in RECORD_READERS:
                return f"record:{module}"
            if module not in DEFINERS:
                return module
        frame = frame.f_back
    return "outside graphmem"


@contextmanager
def counting() -> Iterator[Checks]:
    """Count the checks made meanwhile, in this thread and in threads started meanwhile."""
    checks = Checks()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code is NAMESPACE_CHECK:
                checks.namespace[_asker(frame.f_back)] += 1
            elif frame.f_code is REWARD_CHECK:
                checks.reward[_asker(frame.f_back)] += 1
        elif (
            event == "c_call"
            and getattr(arg, "__self__", None) is NAMESPACE_RE
            and frame.f_code is not NAMESPACE_CHECK
        ):  # the pattern used outside check_namespace is a check too
            checks.namespace[_asker(frame)] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield checks
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def _memory(store: MemoryStore, namespace: str) -> GraphMemory:
    mem = GraphMemory(store, embedder=HashingEmbedder())
    for i in range(6):
        mem.add_note(namespace, f"note {i}: the kettle is in cupboard {i}")
    mem.retrieve(namespace, "warm up: where is the kettle?")  # first-call work done
    return mem


def _assert_once(checks: Checks, *, reward: bool) -> None:
    assert checks.below("namespace") == {}, checks
    assert checks.at_boundary("namespace") == 1, checks
    if reward:
        assert checks.below("reward") == {}, checks
        assert checks.at_boundary("reward") == 1, checks
    else:
        assert not checks.reward, checks


Search = Callable[[str], str | None]
Report = Callable[[str, float], object]


def _through_api(mem: GraphMemory, namespace: str) -> tuple[Search, Report]:
    def search(query: str) -> str | None:
        return mem.retrieve(namespace, query, open_episode=True).episode_id

    def report(episode_id: str, reward: float) -> object:
        return mem.finish_episode(namespace, episode_id, reward)

    return search, report


def _through_mcp(mem: GraphMemory, namespace: str) -> tuple[Search, Report]:
    """The tools as an MCP client calls them: through the server, in its worker thread."""
    server = build_server(mem)

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        _, structured = asyncio.run(server.call_tool(tool, arguments))
        return cast(dict[str, Any], structured)

    def search(query: str) -> str | None:
        found = call("search_memory", {"query": query, "namespace": namespace})
        return cast(str | None, found["episode_id"])

    def report(episode_id: str, reward: float) -> object:
        arguments = {"episode_id": episode_id, "reward": reward, "namespace": namespace}
        return call("report_outcome", arguments)

    return search, report


SURFACES_UNDER_TEST = pytest.mark.parametrize(
    "surface", [_through_api, _through_mcp], ids=["api", "mcp"]
)


@SURFACES_UNDER_TEST
def test_one_search_and_one_report_check_namespace_and_reward_once(
    store: MemoryStore,
    namespace: str,
    surface: Callable[[GraphMemory, str], tuple[Search, Report]],
) -> None:
    search, report = surface(_memory(store, namespace), namespace)

    with counting() as searched:
        episode_id = search("where is the kettle?")
    _assert_once(searched, reward=False)

    assert episode_id is not None
    with counting() as reported:
        report(episode_id, 1.0)
    _assert_once(reported, reward=True)
    if isinstance(store, EmbeddedStore):
        # The embedded store reads back the one log record each call writes (the live path
        # applies what a replay would): a namespace is checked once a record.
        assert searched.records() <= 1 and reported.records() <= 1, (searched, reported)


def test_a_checked_namespace_is_not_checked_again() -> None:
    ns = Namespace("team/alice")
    with counting() as checks:
        assert Namespace(ns) is ns
        assert Namespace("team/bob") == "team/bob"
    assert checks.namespace == Counter({"outside graphmem": 1})


def test_the_count_fails_when_a_layer_below_checks_again(
    store: MemoryStore, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the test above guards against: here an operation that checks the namespace again
    (a function compiled as if it were written in ops/retrieve.py)."""
    import graphmem.ops.retrieve as retrieve

    scope: dict[str, Any] = {"check_namespace": check_namespace, "first": retrieve._check_query}
    code = "def _check_query(query):\n    check_namespace('again')\n    return first(query)\n"
    exec(compile(code, PACKAGE + "ops/retrieve.py", "exec"), scope)
    monkeypatch.setattr(retrieve, "_check_query", scope["_check_query"])
    search, _ = _through_api(_memory(store, namespace), namespace)
    with counting() as checks:
        search("where is the kettle?")
    assert checks.below("namespace")["ops/retrieve.py"] == 1
    with pytest.raises(AssertionError):
        _assert_once(checks, reward=False)


@SURFACES_UNDER_TEST
def test_bad_input_is_refused_at_the_boundary_and_changes_nothing(
    store: MemoryStore,
    namespace: str,
    surface: Callable[[GraphMemory, str], tuple[Search, Report]],
) -> None:
    mem = _memory(store, namespace)
    search, report = surface(mem, namespace)
    episode_id = search("where is the kettle?")
    assert episode_id is not None
    before = sorted((m.id, m.q, m.uses, m.model_dump_json()) for m in store.iter_nodes(namespace))
    refused: tuple[type[Exception], ...] = (InvalidNamespace, InvalidReward)
    if surface is _through_mcp:
        from mcp.server.fastmcp.exceptions import ToolError

        refused = (ToolError,)
    for bad in ("bad namespace!", "../x", "x" * 129):
        with pytest.raises(refused, match="namespace"):
            surface(mem, bad)[0]("where is the kettle?")
        with pytest.raises(refused, match="namespace"):
            surface(mem, bad)[1](episode_id, 1.0)
    for reward in (2.0, float("nan"), float("inf"), -5.0):
        with pytest.raises(refused, match="reward"):
            report(episode_id, reward)
    for alpha in (0.0, 1.5, float("nan")):  # the learning rate, checked where it is chosen
        with pytest.raises(InvalidInput, match="alpha"):
            mem.finish_episode(namespace, episode_id, 1.0, alpha=alpha)
    after = sorted((m.id, m.q, m.uses, m.model_dump_json()) for m in store.iter_nodes(namespace))
    assert after == before
