"""Argument checks the commands share: each refuses a bad value in one line (exit 2) before
anything is opened or changed."""

from __future__ import annotations

import argparse
from typing import overload

from graphmem.errors import InvalidInput, InvalidNamespace
from graphmem.models import Namespace


def at_least_one(text: str) -> int:
    """An argparse ``type``: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


@overload
def checked_namespace(namespace: str, *, name: str = ...) -> Namespace: ...
@overload
def checked_namespace(namespace: None, *, name: str = ...) -> None: ...
def checked_namespace(namespace: str | None, *, name: str = "--namespace") -> Namespace | None:
    """``--namespace``'s value (or the argument ``name``'s), checked; None when the option was
    not given. An empty one is refused (it read as "every namespace" before, where ``../x`` was
    refused)."""
    if namespace is None:
        return None
    if not namespace:
        or_not = ", or leave the option out" if name.startswith("-") else ""
        raise InvalidNamespace(f"{name} is empty: name a namespace{or_not}")
    try:
        return Namespace(namespace)
    except InvalidInput as e:
        raise InvalidNamespace(f"{name}: {e}") from e
