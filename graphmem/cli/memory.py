"""``graphmem restore``: undo the demotion of a memory."""

from __future__ import annotations

import argparse

from graphmem.cli.args import checked_namespace
from graphmem.settings import Settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    restore = sub.add_parser(
        "restore", help="make a demoted memory live again (its Q and uses unchanged)"
    )
    restore.add_argument("namespace", help="the memory's namespace")
    restore.add_argument("memory_id", help="id of the demoted memory")
    restore.set_defaults(handler=_restore)


def _restore(args: argparse.Namespace) -> int:
    from graphmem.ops.obsolescence import restore_in

    namespace = checked_namespace(args.namespace, name="NAMESPACE")
    store = Settings.from_env().open_store(create=False)  # a mistyped path: create nothing
    try:
        was = store.get(namespace, args.memory_id)
        restore_in(store, namespace, args.memory_id)
        state = f"restored (was: {was.obsolete_reason})" if was.obsolete else "already live"
        print(f"{args.memory_id}: {state}")
    finally:
        store.close()
    return 0
