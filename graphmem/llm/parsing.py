"""Finding the JSON object in a model's reply, in time linear in the reply's length.

A reply may be the bare object, the object in ```json fences, or the object amid prose (and
after a ``<think>`` block). One pass pairs the braces (outside JSON strings), then at most
:data:`MAX_CANDIDATES` of the paired spans, outermost first, are handed to ``json.loads``: no
re-scanning from every ``{``, no partial-JSON repair, so a 100k-character reply costs
milliseconds, not minutes.

>>> parse_json_object('Sure! ```json\\n{"a": {"b": 1}}\\n``` hope it helps')
{'a': {'b': 1}}
"""

from __future__ import annotations

import json
from typing import Any

MAX_CANDIDATES = 16
"""Spans tried with ``json.loads`` at most (each costs at most one pass over the reply)."""


class InvalidOutput(ValueError):
    """The model's reply was not a JSON object valid for the operation."""


def without_thinking(text: str) -> str:
    """``text`` without ``<think>…</think>`` blocks (an unclosed one is left as it is)."""
    parts: list[str] = []
    at = 0
    while True:
        start = text.find("<think>", at)
        end = text.find("</think>", start + 7) if start >= 0 else -1
        if start < 0 or end < 0:
            parts.append(text[at:])
            return "".join(parts)
        parts.append(text[at:start])
        at = end + len("</think>")


def object_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced ``{…}`` in ``text``, ordered by start (outer first).

    Braces inside JSON strings are skipped (strings are tracked only inside braces, so an
    apostrophe or a stray quote in the prose around the object does not matter).
    """
    spans: list[tuple[int, int]] = []
    opened: list[int] = []
    in_string = False
    escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == "{":
            opened.append(i)
        elif ch == "}":
            if opened:
                spans.append((opened.pop(), i + 1))
        elif ch == '"' and opened:
            in_string = True
    spans.sort()
    return spans


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: bare, inside ```json fences, or amid prose."""
    text = without_thinking(text)
    for start, end in object_spans(text)[:MAX_CANDIDATES]:
        try:
            value = json.loads(text[start:end])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise InvalidOutput("the reply holds no JSON object")
