"""``graphmem store retain`` and the capacity part of ``graphmem store check``, on any store.

A capacity is configuration, not data: the store does not record it, so both commands take
it as options (``--max-memories``, ``--max-per-kind``). ``retain`` evicts what each namespace
holds beyond it (archived, or deleted with ``--delete``); ``check`` reports a namespace over
it, and a memory retention archived whose parts are still live.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from graphmem.config import RETENTION_POLICIES, RetentionConfig
from graphmem.errors import InvalidInput
from graphmem.models import MemoryKind, Namespace

if TYPE_CHECKING:
    from graphmem.stores.base import MemoryStore


def add_capacity_options(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument(
        "--max-memories",
        type=int,
        default=None,
        metavar="N",
        help="live memories a namespace may hold" + (" (this or --max-per-kind)" * required),
    )
    parser.add_argument(
        "--max-per-kind",
        action="append",
        default=[],
        metavar="KIND=N",
        help="a cap per kind, e.g. Note=500 (repeatable)",
    )
    parser.add_argument(
        "--kinds",
        default=None,
        help="kinds counted, comma-separated (default: Procedure,Note,Tip)",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        help="only this namespace (repeatable; default: every namespace)",
    )


def register_retain(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    retain = actions.add_parser(
        "retain",
        help="evict what each namespace holds beyond a capacity (archived: obsolete with the "
        "reason; --delete removes it)",
    )
    retain.add_argument(
        "dir",
        nargs="?",
        type=Path,
        help="an embedded store directory (default: the configured store, Neo4j included)",
    )
    add_capacity_options(retain, required=True)
    retain.add_argument("--policy", choices=RETENTION_POLICIES, default="utility")
    retain.add_argument("--grace-episodes", type=int, default=None, metavar="N")
    retain.add_argument("--delete", action="store_true", help="delete instead of archiving")
    retain.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    retain.set_defaults(handler=_retain)


def retention_from_args(args: argparse.Namespace) -> RetentionConfig | None:
    """The capacity the options name; None when they name none."""
    per_kind: dict[MemoryKind, int] = {}
    for item in args.max_per_kind:
        kind, sep, n = item.partition("=")
        if not sep or not n.strip().lstrip("-").isdigit():
            raise InvalidInput(f"--max-per-kind takes KIND=N, got {item!r}")
        per_kind[_kind(kind)] = int(n)
    if args.max_memories is None and not per_kind:
        return None
    fields: dict[str, object] = {"max_memories": args.max_memories, "max_per_kind": per_kind}
    if args.kinds:
        fields["kinds"] = tuple(_kind(k) for k in args.kinds.split(",") if k.strip())
    for name in ("policy", "grace_episodes"):
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    if getattr(args, "delete", False):
        fields["on_evict"] = "delete"
    return RetentionConfig(**fields)


def _kind(name: str) -> MemoryKind:
    for kind in MemoryKind:
        if kind.value.lower() == name.strip().lower():
            return kind
    raise InvalidInput(f"unknown kind {name!r}; kinds: {', '.join(k.value for k in MemoryKind)}")


def open_store(directory: Path | None) -> MemoryStore:
    if directory is not None:
        from graphmem.stores.embedded import EmbeddedStore
        from graphmem.stores.embedded.sqlite_log import is_sqlite_store

        if not (directory / "CURRENT").is_file() and not is_sqlite_store(directory):
            raise InvalidInput(
                f"{directory} holds no embedded graphmem store (no CURRENT file, no "
                "graphmem.sqlite)"
            )
        return EmbeddedStore.open(directory)  # either durability: the one the directory holds
    from graphmem.settings import Settings

    return Settings.from_env().open_store(create=False)


def check_capacity_of(store: MemoryStore, retention: RetentionConfig, namespaces: list[str]) -> int:
    """Print what breaks the capacity; 0 when nothing does, else 1."""
    from graphmem.ops.retention import check_capacity, live_units

    spaces = [Namespace(ns) for ns in namespaces or store.namespaces()]
    problems = check_capacity(store, retention, spaces)
    for p in problems:
        print(f"capacity: {p.namespace}: {p.problem}")
    if not problems:
        sizes = {ns: len(live_units(store, ns, retention.kinds)) for ns in spaces}
        biggest = max(sizes.values(), default=0)
        print(
            f"capacity: {len(spaces)} namespace(s) within it (the largest holds {biggest} live "
            f"memories; cap {retention.max_memories or '-'}"
            + "".join(f", {k} {n}" for k, n in retention.max_per_kind.items())
            + ")"
        )
    return 1 if problems else 0


def _retain(args: argparse.Namespace) -> int:
    from graphmem.config import MemoryConfig
    from graphmem.embedding import HashingEmbedder
    from graphmem.memory import GraphMemory
    from graphmem.ops.retention import plan_namespace

    retention = retention_from_args(args)
    if retention is None:
        raise InvalidInput("`graphmem store retain` needs --max-memories or --max-per-kind")
    store = open_store(args.dir)
    try:
        memory = GraphMemory(
            store, embedder=HashingEmbedder(8), config=MemoryConfig(retention=retention)
        )
        for ns in args.namespace or map(Namespace, store.namespaces()):
            if args.dry_run:
                units, plan = plan_namespace(store, ns, retention, memory.config)
                print(f"{ns}: {len(units)} live, would evict {len(plan)}")
                for m, score in plan:
                    print(f"  {m.kind} {m.id} (q {m.q:.3f}, uses {m.uses}, score {score:.6g})")
                continue
            result = memory.enforce_retention(ns)
            verb = "deleted" if retention.on_evict == "delete" else "archived"
            print(
                f"{ns}: {result.live_before} live, {verb} {len(result.evicted)}, "
                f"{result.live_after} left"
            )
    finally:
        store.close()
    return 0
