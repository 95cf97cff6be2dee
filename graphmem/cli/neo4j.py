"""``graphmem neo4j start|stop|status`` and ``graphmem schema apply``."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from graphmem.errors import ConfigError
from graphmem.launcher.server import DEFAULT_HEAP, DEFAULT_PAGECACHE

if TYPE_CHECKING:
    from graphmem.launcher.server import Neo4jServer


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    neo4j = sub.add_parser("neo4j", help="run a local Neo4j server from Maven Central jars")
    actions = neo4j.add_subparsers(dest="neo4j_command", metavar="ACTION", required=True)

    start = actions.add_parser("start", help="start (or reuse) a local Neo4j server")
    _server_options(start)
    secret = start.add_mutually_exclusive_group()
    secret.add_argument("--password", help="password of user neo4j (prefer --password-env)")
    secret.add_argument(
        "--password-env", metavar="VAR", help="read the password from this environment variable"
    )
    secret.add_argument("--no-auth", action="store_true", help="turn authentication off")
    start.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for Bolt (default 180)"
    )
    start.add_argument(
        "--version",
        dest="neo4j_version",
        metavar="VERSION",
        help="Neo4j release, e.g. 2026.09.0 (Java 21+; in-index filtered vector search) "
        "(default: the packaged 5.26 LTS); fetched once with Maven",
    )
    start.add_argument(
        "--heap",
        default=DEFAULT_HEAP,
        help=f"largest JVM heap, e.g. 4g (default {DEFAULT_HEAP}); applies from this start on",
    )
    start.add_argument(
        "--pagecache",
        default=DEFAULT_PAGECACHE,
        help="page cache for the store files and vector index, e.g. 6g "
        f"(default {DEFAULT_PAGECACHE}); size it to the store for large graphs",
    )
    start.set_defaults(handler=_start)

    stop = actions.add_parser("stop", help="stop the local Neo4j server")
    _server_options(stop)
    stop.add_argument(
        "--timeout", type=float, default=60.0, help="seconds before SIGKILL (default 60)"
    )
    stop.set_defaults(handler=_stop)

    status = actions.add_parser("status", help="is the local Neo4j server running?")
    _server_options(status)
    status.set_defaults(handler=_status)

    schema = sub.add_parser("schema", help="Neo4j schema: constraints and indexes")
    schema_actions = schema.add_subparsers(dest="schema_command", metavar="ACTION", required=True)
    apply = schema_actions.add_parser(
        "apply", help="create graphmem's constraints and indexes (idempotent)"
    )
    apply.add_argument(
        "--dimension", type=int, default=384, help="embedding dimension (default 384)"
    )
    apply.add_argument(
        "--wait",
        type=float,
        default=300.0,
        help="seconds to wait for the indexes to come online (default 300; a vector index "
        "over a million memories takes longer)",
    )
    apply.set_defaults(handler=_schema_apply)


DEFAULT_BOLT_PORT, DEFAULT_HTTP_PORT = 7687, 7474


def _server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", type=Path, help="instance directory (default: the XDG data dir)"
    )
    parser.add_argument(
        "--bolt-port",
        type=int,
        help=f"Bolt port (default: the instance's, else {DEFAULT_BOLT_PORT})",
    )
    parser.add_argument(
        "--http-port",
        type=int,
        help=f"HTTP port (default: the instance's, else {DEFAULT_HTTP_PORT})",
    )


def instance_ports(data_dir: Path) -> tuple[int | None, int | None]:
    """The Bolt and HTTP ports an instance's ``conf/neo4j.conf`` names (None where it names
    none, or there is no conf yet): the ports it was last started with."""
    from graphmem.launcher.server import read_conf

    try:
        conf = read_conf(data_dir / "conf" / "neo4j.conf")
    except OSError:
        return None, None

    def port(key: str) -> int | None:
        values = conf.get(key)
        if not values:
            return None
        text = values[-1].rpartition(":")[2]
        return int(text) if text.isdigit() else None

    return port("server.bolt.listen_address"), port("server.http.listen_address")


def _server(args: argparse.Namespace, *, auth: bool = True) -> Neo4jServer:
    """The instance the options name; a port not given is the instance's own, else the default."""
    from graphmem.launcher.server import Neo4jServer, default_data_dir

    data_dir = args.data_dir or default_data_dir()
    bolt, http = instance_ports(data_dir)
    return Neo4jServer(
        data_dir,
        bolt_port=_first(args.bolt_port, bolt, DEFAULT_BOLT_PORT),
        http_port=_first(args.http_port, http, DEFAULT_HTTP_PORT),
        auth=auth,
        version=getattr(args, "neo4j_version", None),
        heap=getattr(args, "heap", DEFAULT_HEAP),
        pagecache=getattr(args, "pagecache", DEFAULT_PAGECACHE),
    )


def _first(*ports: int | None) -> int:
    return next(p for p in ports if p is not None)


def _password(args: argparse.Namespace, data_dir: Path) -> str | None:
    """The password from the options or environment; a fresh one saved to a file otherwise."""
    if args.no_auth:
        return None
    if args.password:
        return str(args.password)
    if args.password_env:
        value = os.environ.get(args.password_env)
        if not value:
            raise ConfigError(f"environment variable {args.password_env} is not set")
        return value
    if os.environ.get("GRAPHMEM_NEO4J_PASSWORD"):
        return os.environ["GRAPHMEM_NEO4J_PASSWORD"]
    saved = data_dir / "conf" / "password"
    if saved.is_file():
        return saved.read_text(encoding="utf-8").strip()
    from graphmem.launcher.server import make_private_dir

    password = secrets.token_urlsafe(18)
    make_private_dir(make_private_dir(data_dir) / "conf")
    fd = os.open(saved, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(password + "\n")
    print(f"generated a password for user neo4j, saved in {saved} (mode 600)", file=sys.stderr)
    return password


def _start(args: argparse.Namespace) -> int:
    server = _server(args, auth=not args.no_auth)
    password = _password(args, server.data_dir)
    result = server.start(password, timeout=args.timeout)
    verb = "already running" if result.reused else f"started in {result.seconds:.1f}s"
    print(f"Neo4j {server.version} {verb} (pid {result.pid}, data {server.data_dir})")
    print(f"  Bolt:    {server.bolt_uri}  (also neo4j://{server.bolt_uri.split('://', 1)[1]})")
    print(f"  Browser: {server.http_url}/browser/")
    print(f"  auth:    {'user neo4j' if server.auth else 'off'}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    server = _server(args)
    if server.stop(timeout=args.timeout):
        print(f"Neo4j stopped ({server.data_dir})")
    else:
        print(f"Neo4j was not running ({server.data_dir})")
    return 0


def _status(args: argparse.Namespace) -> int:
    status = _server(args).status()
    if status.running:
        print(
            f"Neo4j running (pid {status.pid}) at {status.bolt_uri}, Browser "
            f"{status.http_url}/browser/, data {status.data_dir}"
        )
        return 0
    print(f"Neo4j not running (data {status.data_dir})")
    return 3


def _schema_apply(args: argparse.Namespace) -> int:
    from graphmem.settings import Settings
    from graphmem.stores.neo4j import Neo4jStore
    from graphmem.stores.neo4j.schema import setup

    settings = Settings.from_env()
    if not settings.neo4j_uri:
        raise ConfigError("set GRAPHMEM_NEO4J_URI (and _USER/_PASSWORD) to the Neo4j to set up")
    store = Neo4jStore.from_uri(
        settings.neo4j_uri,
        user=settings.neo4j_user,
        password=settings.neo4j_password,
        database=settings.neo4j_database,
    )
    try:
        applied = setup(
            store.driver, args.dimension, database=settings.neo4j_database, wait=args.wait
        )
    finally:
        store.close()
    print(f"schema version {applied.version} applied to {settings.neo4j_uri}: ", end="")
    print(f"{applied.statements} statements, dimension {applied.dimension}")
    return 0
