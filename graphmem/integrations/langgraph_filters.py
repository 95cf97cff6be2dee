"""LangGraph store semantics for :mod:`graphmem.integrations.langgraph_store`: value filters and
namespace match conditions, as LangGraph's own stores read them.

Filters: ``{"field": value}`` is an exact match (nested dicts and lists compare element-wise;
``True`` never equals ``1``); ``{"field": {"$op": value}}`` with ``$eq $ne $gt $gte $lt $lte``;
``"a.b"`` reaches into nested objects when no top-level key ``"a.b"`` exists. Numbers compare
with numbers and strings with strings; anything else (or NaN) never satisfies a comparison.

>>> passes({"price": 10, "user": {"tier": "gold"}}, {"price": {"$gt": 5}, "user.tier": "gold"})
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import MatchCondition

from graphmem.errors import InvalidInput

_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _lookup(value: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """``value[key]``, or a dotted path into nested objects (``"user.access-level"``)."""
    if key in value:
        return True, value[key]
    current: Any = value
    for part in key.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return False, None
        current = current[part]
    return True, current


def passes(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    if not filter:
        return True
    for key, expected in filter.items():
        present, actual = _lookup(value, key)
        if not _compare(present, actual, expected):
            return False
    return True


def _compare(present: bool, actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(_operator(present, actual, o, v) for o, v in expected.items())
        if not isinstance(actual, Mapping):
            return False
        return all(_compare(k in actual, actual.get(k), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_compare(True, a, e) for a, e in zip(actual, expected, strict=True))
        )
    return present and _same(actual, expected)


def _same(a: Any, b: Any) -> bool:
    # JSON has no separate bool and int: keep True from matching 1.
    return isinstance(a, bool) == isinstance(b, bool) and bool(a == b)


def _operator(present: bool, actual: Any, op: str, expected: Any) -> bool:
    if op not in _OPERATORS:
        raise InvalidInput(
            f"unsupported filter operator {op!r}; use one of {', '.join(_OPERATORS)}"
        )
    if op == "$eq":
        return present and _same(actual, expected)
    if op == "$ne":
        return not (present and _same(actual, expected))
    if not present:
        return False
    a, b = _comparable(actual), _comparable(expected)
    if a is None or b is None or isinstance(a, str) != isinstance(b, str):
        return False
    if op == "$gt":
        return a > b  # type: ignore[operator]
    if op == "$gte":
        return a >= b  # type: ignore[operator]
    if op == "$lt":
        return a < b  # type: ignore[operator]
    return a <= b  # type: ignore[operator]


def _comparable(x: Any) -> int | float | str | None:
    """Numbers compare as numbers and strings as strings; anything else never compares.

    Integers stay integers: Python compares int with float exactly, while ``float(10**400)``
    overflows.
    """
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return None if math.isnan(x) else x
    if isinstance(x, str):
        return x
    return None


def matches_namespace(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInput(f"unsupported namespace match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


__all__ = ["matches_namespace", "passes"]
