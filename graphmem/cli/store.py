"""``graphmem stats``, ``graphmem export`` and ``graphmem import``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from graphmem.cli.args import checked_namespace
from graphmem.errors import InvalidInput, StoreError
from graphmem.settings import Settings, redact_uri


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = sub.add_parser("stats", help="count memories per kind, and edges, per namespace")
    stats.add_argument("--namespace", "-n", help="only this namespace")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(handler=_stats)

    export = sub.add_parser("export", help="write memories as JSON Lines")
    export.add_argument("path", help="output file, or - for standard output")
    export.add_argument("--namespace", "-n", help="only this namespace")
    export.set_defaults(handler=_export)

    imp = sub.add_parser("import", help="read memories from a JSON Lines export")
    imp.add_argument("path", help="input file, or - for standard input")
    imp.add_argument("--namespace", "-n", help="move every record into this namespace")
    imp.set_defaults(handler=_import)


def _stats(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    only = checked_namespace(args.namespace)
    store = settings.open_store(create=False)
    try:
        namespaces = [only] if only is not None else store.namespaces()
        table: dict[str, Any] = {ns: store.counts(ns) for ns in namespaces}
        if args.json:
            print(json.dumps({"backend": settings.backend, "namespaces": table}, indent=2))
            return 0
        where = redact_uri(settings.neo4j_uri) if settings.neo4j_uri else str(settings.store_path)
        print(f"store: {settings.backend} ({where}), dimension {store.dimension}")
        if not table:
            print("no memories yet")
        for ns, counts in table.items():
            parts = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
            print(f"  {ns}: {parts or 'empty'}")
    finally:
        store.close()
    return 0


def _export(args: argparse.Namespace) -> int:
    checked_namespace(args.namespace)
    store = Settings.from_env().open_store(create=False)
    try:
        if args.path == "-":
            n = store.export_jsonl(sys.stdout, args.namespace)
        else:
            path = Path(args.path)
            tmp = path.with_name(path.name + ".tmp")
            try:
                # Owner-only, as the store's own files are: an export holds every memory.
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.fchmod(fd, 0o600)  # a stale .tmp left with other modes is tightened too
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    n = store.export_jsonl(out, args.namespace)
                tmp.replace(path)
            except OSError as e:
                tmp.unlink(missing_ok=True)
                raise StoreError(f"cannot write {path}: {e.strerror or e}") from e
            print(f"exported {n} lines to {path}", file=sys.stderr)
    finally:
        store.close()
    return 0


def _import(args: argparse.Namespace) -> int:
    checked_namespace(args.namespace)
    store = Settings.from_env().open_store()
    try:
        if args.path == "-":
            nodes, edges = store.import_jsonl(sys.stdin, namespace=args.namespace)
        else:
            path = Path(args.path)
            if not path.is_file():
                raise InvalidInput(f"no such file: {path}")
            try:
                with path.open(encoding="utf-8") as lines:
                    nodes, edges = store.import_jsonl(lines, namespace=args.namespace)
            except OSError as e:  # unreadable (permissions, I/O error): nothing was imported
                raise InvalidInput(f"cannot read {path}: {e.strerror or e}") from e
        print(f"imported {nodes} memories and {edges} edges", file=sys.stderr)
    finally:
        store.close()
    return 0
