"""Hostile-input strategies and the "a failed call changes nothing" check."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphmem.errors import GraphmemError
from graphmem.stores.base import MemoryStore

from ._workers import backend_of

T = TypeVar("T")

EXAMPLES = {"embedded": 40, "neo4j": 12}
"""Hypothesis examples per property: Neo4j round trips cost far more on a loaded box."""

CYPHERISH = (
    "'); MATCH (n) DETACH DELETE n //",
    '"}) MERGE (x:Memory {namespace: "other"}) RETURN x //',
    "` ) RETURN 1 //",
    "$namespace",
    "{id: 'x'}",
    "MATCH (m:Memory) SET m.q = 99",
    "CALL dbms.security.listUsers()",
    "%s %d {0} ${x}",
    "' OR 1=1 --",
    "\\'; \\u0027",
    "/* */ // \\",
)
SPECIAL = (
    "'", '"', "`", "\\", "\x00", "\x07", "\x08", "\x1b[31m", "\x7f", "\u0085", "\u200b",
    "\u200f", "\u202e", "\u2028", "\u2029", "\ufeff", "\ufffd", "🚀", "🧠", "👩‍👩‍👧", "漢字",
    "עברית", "العربية", "e\u0301", "\r\n", "\t", "{", "}", "$", "\n",
)  # fmt: skip

hostile_text = st.one_of(
    st.text(max_size=120),
    st.lists(
        st.one_of(st.sampled_from(CYPHERISH), st.sampled_from(SPECIAL), st.text(max_size=6)),
        max_size=16,
    ).map("".join),
    st.text(st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]), max_size=12),
)
"""Text that breaks naive escaping, encoding or query building (no lone surrogates: see the
separate surrogate test)."""


def snapshot(store: MemoryStore, prefix: str) -> str:
    """Everything a test could have touched: the whole embedded store, or every Neo4j namespace
    under ``prefix`` (the shared database also holds other tests' data)."""
    out = io.StringIO()
    if backend_of(store) == "embedded":
        store.export_jsonl(out)
        return out.getvalue()
    for ns in store.namespaces():
        if ns == prefix or ns.startswith(prefix + "-"):
            store.export_jsonl(out, ns)
    return out.getvalue()


def refused_cleanly(store: MemoryStore, prefix: str, call: Callable[[], T]) -> GraphmemError:
    """``call`` must raise one clear GraphmemError and change nothing."""
    before = snapshot(store, prefix)
    try:
        call()
    except GraphmemError as e:
        message = str(e)
        assert message.strip() and "\n" not in message, f"unclear error message {message!r}"
        assert snapshot(store, prefix) == before, f"a refused call changed the store ({e})"
        return e
    raise AssertionError("the call was accepted but should have been refused")


def stored_or_refused(store: MemoryStore, prefix: str, call: Callable[[], T]) -> T | None:
    """Either ``call`` succeeds (returns its value) or it is refused cleanly (returns None)."""
    before = snapshot(store, prefix)
    try:
        return call()
    except GraphmemError as e:
        assert str(e).strip() and "\n" not in str(e), f"unclear error message {str(e)!r}"
        assert snapshot(store, prefix) == before, f"a refused call changed the store ({e})"
        return None


def check_property(store: MemoryStore, strategy: st.SearchStrategy[Any], test: Any) -> None:
    """Run ``test(value)`` on hypothesis examples of ``strategy`` (budget per backend)."""

    @settings(
        max_examples=EXAMPLES[backend_of(store)],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(strategy)
    def prop(value: Any) -> None:
        test(value)

    prop()
