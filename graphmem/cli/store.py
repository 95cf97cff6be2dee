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
from graphmem.settings import Settings
from graphmem.stores.neo4j.uri import shown_uri


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
    what = imp.add_mutually_exclusive_group()
    what.add_argument(
        "--notes",
        action="store_true",
        help="the file holds notes, not an export: one a line, a JSON string or an object of "
        "content and add_note's fields (tags, valid_at, source_ref, ...); stored into "
        "--namespace with add_notes (embedded, keywords extracted), a batch at a time",
    )
    what.add_argument(
        "--trajectories",
        action="store_true",
        help="the file holds trajectories, one JSON object a line (task, steps, reward, "
        "success), built into --namespace as procedures a batch at a time",
    )
    imp.add_argument(
        "--batch", type=int, default=256, help="--notes/--trajectories: items a write (256)"
    )
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
        where = shown_uri(settings.neo4j_uri) if settings.neo4j_uri else str(settings.store_path)
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
    if args.notes or args.trajectories:
        return _ingest(args)
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


def _ingest(args: argparse.Namespace) -> int:
    """``graphmem import --notes|--trajectories FILE -n NS``: each batch of ``--batch`` lines
    is one add_notes / build_many call (one atomic write); a bad line stops the import with
    its line number, the batches before it stored."""
    what = "notes" if args.notes else "trajectories"
    if not args.namespace:
        raise InvalidInput(f"import --{what} needs --namespace")
    if not 1 <= args.batch <= 10_000:
        raise InvalidInput("--batch is from 1 to 10000")
    if args.path == "-":
        lines = sys.stdin.read().splitlines()
    else:
        path = Path(args.path)
        if not path.is_file():
            raise InvalidInput(f"no such file: {path}")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidInput(f"cannot read {path}: {e}") from e
    items: list[tuple[int, Any]] = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append((no, json.loads(line)))
        except ValueError as e:
            raise InvalidInput(f"line {no}: not JSON ({e})") from e
    memory = Settings.from_env().open_memory()
    stored = 0
    try:
        for start in range(0, len(items), args.batch):
            chunk = items[start : start + args.batch]
            try:
                if args.notes:
                    memory.add_notes(args.namespace, [item for _, item in chunk])
                else:
                    memory.build_many(args.namespace, [item for _, item in chunk])
            except InvalidInput as e:
                where = _line_of(str(e), chunk)
                raise InvalidInput(
                    f"{where}{e} ({stored} {what} of earlier lines were stored)"
                ) from e
            stored += len(chunk)
            print(f"{what}: {stored}/{len(items)}", file=sys.stderr, flush=True)
    finally:
        memory.close()
    print(f"imported {stored} {what} into {args.namespace}", file=sys.stderr)
    return 0


def _line_of(message: str, chunk: list[tuple[int, Any]]) -> str:
    """``line N: `` for an error that names an item of ``chunk`` (``notes[3]: ...``)."""
    import re

    found = re.match(r"(?:notes|trajectories)\[(\d+)\]", message)
    if found and int(found.group(1)) < len(chunk):
        return f"line {chunk[int(found.group(1))][0]}: "
    return ""
