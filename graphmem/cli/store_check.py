"""``graphmem store check DIR`` and ``graphmem store repair DIR`` for the embedded store."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from graphmem.cli.store_retain import (
    add_capacity_options,
    check_capacity_of,
    open_store,
    register_retain,
    retention_from_args,
)
from graphmem.errors import InvalidInput
from graphmem.settings import Settings

if TYPE_CHECKING:
    from graphmem.config import RetentionConfig


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    store = sub.add_parser(
        "store", help="check or repair an embedded store's files; keep namespaces to a capacity"
    )
    actions = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)

    check = actions.add_parser(
        "check",
        help="verify every checksum, record and approximate index (and, given a capacity, "
        "that no namespace holds more live memories); exit 0 if intact, 1 if not",
    )
    _dir_option(check)
    add_capacity_options(check)
    check.set_defaults(handler=_check)
    register_retain(actions)

    repair = actions.add_parser(
        "repair",
        help="cut the log back to its last intact record (the cut bytes are kept) and delete "
        "a bad approximate index",
    )
    _dir_option(repair)
    repair.set_defaults(handler=_repair)


def _dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        type=Path,
        help="the store directory (default: $GRAPHMEM_STORE, else ./graphmem-data)",
    )


def _store_dir(args: argparse.Namespace) -> Path:
    if args.dir is not None:
        return Path(args.dir)
    settings = Settings.from_env()
    if settings.backend != "embedded":
        raise InvalidInput("`graphmem store` checks an embedded store: name its directory")
    return settings.store_path


def _check(args: argparse.Namespace) -> int:
    retention = retention_from_args(args)
    if retention is not None and args.dir is None and Settings.from_env().backend != "embedded":
        return _check_capacity(None, retention, args.namespace)  # Neo4j: the capacity only
    code = _check_files(args)
    if retention is not None and code == 0:
        code = _check_capacity(_store_dir(args), retention, args.namespace)
    return code


def _check_capacity(directory: Path | None, retention: RetentionConfig, spaces: list[str]) -> int:
    store = open_store(directory)
    try:
        return check_capacity_of(store, retention, spaces)
    finally:
        store.close()


def _check_files(args: argparse.Namespace) -> int:
    from graphmem.stores.embedded.check import check_store

    report = check_store(_store_dir(args))
    for note in report.notes:
        print(f"note: {note}")
    for index in report.indexes:
        print(f"approximate index of {index}: in step with the vectors")
    for text in report.text_files:
        print(f"saved keyword index of {text}: in step with the memories")
    for path, problem in report.index_problems.items():
        kind = "keyword" if path.name.startswith("text-") else "approximate"
        print(
            f"{kind} index {path}: {problem}; it is derived data, which the next open or "
            "search rebuilds (`graphmem store repair` deletes the file)"
        )
    if report.text_index is not None:
        print(f"keyword index ({report.text_index}): in step with the memories")
    for problem in report.text_problems:
        print(f"{problem}; it is derived data, which the next open or search rebuilds")
    if report.intact:
        print(
            f"{report.root}: intact (generation {report.generation}, "
            f"{report.records} log records, {report.wal_bytes} bytes)"
        )
        return 1 if report.index_problems or report.text_problems else 0
    print(f"{report.root}: damaged: {report.problem}")
    if report.repairable:
        print(
            f"  {report.records} intact log records ({report.intact_bytes} of "
            f"{report.wal_bytes} bytes); `graphmem store repair {report.root}` keeps them and "
            "saves the rest beside the log"
        )
    else:
        print(
            "  not repairable (a damaged snapshot or database page): restore the store from a "
            "backup or an export"
        )
    return 1


def _repair(args: argparse.Namespace) -> int:
    from graphmem.stores.embedded.check import repair_store

    result = repair_store(_store_dir(args))
    report = result.report
    for path in result.removed_indexes:
        print(f"deleted the approximate index {path}; the next open rebuilds it")
    if result.backup is None:
        print(f"{report.root}: intact, nothing to repair ({report.records} log records)")
        return 0
    print(
        f"{report.root}: cut the log {report.wal} at byte {report.intact_bytes}: kept "
        f"{report.records} records, dropped {result.dropped_records} "
        f"({result.dropped_bytes} bytes), saved in {result.backup}"
    )
    return 0
