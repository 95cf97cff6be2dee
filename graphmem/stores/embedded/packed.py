"""Memories and edges as the embedded store keeps them: flat tuples CPython's collector skips.

A pydantic model is about six objects the collector tracks (the model, its ``__dict__``, its
fields-set, a ``TzInfo`` per datetime, the graph's attribute dict). A full collection visits
every tracked object and stops every thread, so with 100k memories in the store one collection
held queries up for 300 ms. A tuple of plain values (str, int, float, bool, None, a datetime
whose tzinfo is a ``datetime.timezone``) is untracked once the collector has seen it, and so is
the attribute dict that holds it: the memories drop out of every collection.

``pack`` is lossless for the memory models (``pack_edge`` for edges): StrEnum members become
their value, lists become tuples, dicts tuples of pairs, a datetime's tzinfo the
``datetime.timezone`` of the same offset, and ``unpack`` turns each back. ``unpack`` builds a
new model without validation (the values were validated on the way in), so each read hands
out a private copy.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from enum import Enum
from typing import Any, get_args, get_origin

from graphmem.models import (
    MEMORY_CLASSES,
    AnyMemory,
    Edge,
    GraphmemModel,
    MemoryKind,
    Namespace,
    construct,
)

Packed = tuple[Any, ...]
"""(kind, fields-set number, the field values in the model's field order)."""

_FIELD_SETS: list[frozenset[str]] = []
_FIELD_SET_NUMBERS: dict[frozenset[str], int] = {}
_ZONES: dict[timedelta | None, tzinfo] = {timedelta(0): UTC}
_NAMESPACES: dict[str, Namespace] = {}


class _Layout:
    """One model class's field names, and which of them hold enums, lists and dicts."""

    __slots__ = ("cls", "dicts", "enums", "lists", "names", "namespaces")

    def __init__(self, cls: type[GraphmemModel]) -> None:
        self.cls = cls
        self.names = tuple(cls.model_fields)
        # field → (its enum, value → member)
        self.enums: dict[str, tuple[type[Enum], dict[Any, Enum]]] = {}
        self.lists: list[str] = []
        self.dicts: list[str] = []
        self.namespaces = [
            n for n, info in cls.model_fields.items() if info.annotation is Namespace
        ]
        for name, info in cls.model_fields.items():
            for candidate in (info.annotation, *get_args(info.annotation)):
                if isinstance(candidate, type) and issubclass(candidate, Enum):
                    self.enums[name] = (candidate, {m.value: m for m in candidate})
                if (candidate is list or get_origin(candidate) is list) and name != "embedding":
                    self.lists.append(name)
                if candidate is dict or get_origin(candidate) is dict:
                    self.dicts.append(name)


_LAYOUTS: dict[str, _Layout] = {kind.value: _Layout(cls) for kind, cls in MEMORY_CLASSES.items()}
_EDGE = _Layout(Edge)


def _field_set_number(fields: set[str]) -> int:
    key = frozenset(fields)
    number = _FIELD_SET_NUMBERS.get(key)
    if number is None:
        number = _FIELD_SET_NUMBERS[key] = len(_FIELD_SETS)
        _FIELD_SETS.append(key)
    return number


def _zone(offset: timedelta | None) -> tzinfo:
    zone = _ZONES.get(offset)
    if zone is None:
        assert offset is not None
        zone = _ZONES[offset] = timezone(offset)
    return zone


def _namespace(value: str) -> Namespace:
    """The Namespace a packed one was (checked when it was packed): one object a namespace."""
    namespace = _NAMESPACES.get(value)
    if namespace is None:
        namespace = _NAMESPACES[value] = str.__new__(Namespace, value)
    return namespace


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Namespace):  # a str subclass, which the collector tracks
        return str(value)
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _plain(v)) for k, v in value.items())
    if isinstance(value, datetime) and not isinstance(value.tzinfo, timezone | None):
        return value.replace(tzinfo=_zone(value.utcoffset()))
    return value


def pack(memory: AnyMemory) -> Packed:
    """``memory`` without its embedding, as a flat tuple of plain values."""
    kind = MemoryKind(memory.kind).value
    values = memory.__dict__
    return (
        kind,
        _field_set_number(memory.__pydantic_fields_set__),
        *(None if name == "embedding" else _plain(values[name]) for name in _LAYOUTS[kind].names),
    )


def packed_kind(packed: Packed) -> str:
    kind: str = packed[0]
    return kind


def unpack(packed: Packed, embedding: list[float] | None = None) -> AnyMemory:
    """A new model of the packed memory, ``embedding`` attached."""
    layout = _LAYOUTS[packed[0]]
    data = _fields(layout, packed)
    data["embedding"] = embedding
    memory: AnyMemory = _build(layout, data, packed[1])  # type: ignore[assignment]
    return memory


def pack_edge(edge: Edge) -> Packed:
    """``edge`` as a flat tuple of plain values (its props as (name, value) pairs)."""
    values = edge.__dict__
    return (
        "Edge",
        _field_set_number(edge.__pydantic_fields_set__),
        *(_plain(values[name]) for name in _EDGE.names),
    )


def unpack_edge(packed: Packed) -> Edge:
    """A new Edge of the packed one."""
    edge: Edge = _build(_EDGE, _fields(_EDGE, packed), packed[1])  # type: ignore[assignment]
    return edge


def _fields(layout: _Layout, packed: Packed) -> dict[str, Any]:
    data = dict(zip(layout.names, packed[2:], strict=True))
    for name in layout.namespaces:
        data[name] = _namespace(data[name])
    for name in layout.lists:
        if data[name] is not None:
            data[name] = list(data[name])
    for name in layout.dicts:
        if data[name] is not None:
            data[name] = dict(data[name])
    for name, (enum, members) in layout.enums.items():
        value = data[name]
        if value is not None:
            # The member by a dict lookup: calling the enum costs ~1 µs a field.
            member = members.get(value)
            data[name] = member if member is not None else enum(value)
    return data


def _build(layout: _Layout, data: dict[str, Any], field_set: int) -> GraphmemModel:
    return construct(layout.cls, data, _FIELD_SETS[field_set])
