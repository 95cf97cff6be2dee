"""Run a real Neo4j 5.26 Community server without Docker, from Maven Central jars.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.launcher.server``.

>>> server = Neo4jServer(Path("/tmp/neo4j-dev"), bolt_port=7687, http_port=7474)
>>> started = server.start(password="a-long-secret")  # doctest: +SKIP
>>> server.stop()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Template

from graphmem.errors import ConfigError
from graphmem.launcher.jars import (
    DEFAULT_ENTRY_POINT,
    SUPPORTED_JAVA,
    Neo4jServerError,
    check_version,
    default_home,
    dir_size,
    ensure_jars,
    entry_point,
    file_lock,
    find_java,
    jars_present,
    java_major,
    neo4j_version,
    resource_dir,
)

__all__ = [
    "SUPPORTED_JAVA",
    "Neo4jServer",
    "Neo4jServerError",
    "ServerStatus",
    "StartResult",
    "check_password",
    "default_data_dir",
    "default_home",
    "dir_size",
    "ensure_jars",
    "find_java",
    "jars_present",
    "java_major",
    "neo4j_version",
    "read_conf",
    "resource_dir",
]

log = logging.getLogger(__name__)

ENTRY_POINT = DEFAULT_ENTRY_POINT
"""Neo4j 5.x's main class; each release's own jar names its own (:func:`entry_point`)."""
ADMIN_TOOL = "org.neo4j.cli.AdminTool"
MIN_PASSWORD_LENGTH = 8
DEFAULT_HEAP_INITIAL, DEFAULT_HEAP, DEFAULT_PAGECACHE = "1g", "2g", "1g"
PID_FILE = "run/graphmem-neo4j.pid"
CONSOLE_LOG = "logs/console.log"
PRIVATE_UMASK = 0o077
"""Files the server (and the admin tool) creates are readable by their owner only."""


def make_private_dir(path: Path) -> Path:
    """Create directory ``path`` owner-only (0700), its missing parents as usual; a directory
    that already exists is left as its owner set it."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process was first
            path.mkdir(mode=0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only (a file rewritten is made so too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(fd, 0o600)
        out.write(text)


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where ``graphmem neo4j start`` keeps its database by default (XDG data directory)."""
    e = os.environ if env is None else env
    base = Path(e["XDG_DATA_HOME"]) if e.get("XDG_DATA_HOME") else Path.home() / ".local" / "share"
    return base / "graphmem" / "neo4j"


# ---- the server ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerStatus:
    """Whether an instance runs, and where to reach it."""

    running: bool
    pid: int | None
    bolt_uri: str
    http_url: str
    data_dir: Path


@dataclass(frozen=True)
class StartResult:
    """What ``start`` did: the pid, the seconds until Bolt answered, whether it was running."""

    pid: int
    seconds: float
    reused: bool


class Neo4jServer:
    """One local Neo4j instance: its data directory, ports and auth setting.

    The data directory is the server's home: ``conf/``, ``data/``, ``logs/`` and ``run/`` live
    there, while the jars are shared from the cached Neo4j home.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        bolt_port: int = 7687,
        http_port: int = 7474,
        auth: bool = True,
        home: Path | None = None,
        listen_address: str = "127.0.0.1",
        version: str | None = None,
        heap: str = DEFAULT_HEAP,
        pagecache: str = DEFAULT_PAGECACHE,
    ) -> None:
        for name, port in (("bolt", bolt_port), ("http", http_port)):
            if not 0 < port < 65536:
                raise ConfigError(f"{name} port must be in 1..65535, got {port}")
        if bolt_port == http_port:
            raise ConfigError("the Bolt and HTTP ports must differ")
        self.data_dir = data_dir.expanduser().resolve()
        self.bolt_port = bolt_port
        self.http_port = http_port
        self.auth = auth
        self.version = check_version(version)
        self.home = home if home is not None else default_home(version=self.version)
        self.listen_address = listen_address
        self.heap = check_memory_size("heap", heap)
        self.pagecache = check_memory_size("page cache", pagecache)

    @property
    def bolt_uri(self) -> str:
        return f"bolt://{self.listen_address}:{self.bolt_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self.listen_address}:{self.http_port}"

    @property
    def conf_file(self) -> Path:
        return self.data_dir / "conf" / "neo4j.conf"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / PID_FILE

    @property
    def log_file(self) -> Path:
        return self.data_dir / CONSOLE_LOG

    # ---- lifecycle ----

    def start(
        self, password: str | None = None, *, timeout: float = 180.0, java: Path | None = None
    ) -> StartResult:
        """Start the server detached (or reuse it if running) and wait until it answers."""
        if self.auth:
            check_password(password)
        self.prepare_dirs()
        # Two starts on one data directory at once must not launch two servers.
        with file_lock(self.pid_file.parent / "start.lock"):
            pid = self.running_pid()
            if pid is not None:
                log.info("Neo4j already running in %s (pid %d)", self.data_dir, pid)
                started = time.monotonic()
                self.wait_ready(password, timeout=timeout, pid=pid)
                return StartResult(pid, time.monotonic() - started, reused=True)
            return self._launch(password, timeout=timeout, java=java)

    def _launch(self, password: str | None, *, timeout: float, java: Path | None) -> StartResult:
        for port in (self.bolt_port, self.http_port):
            if _port_in_use(self.listen_address, port):
                raise Neo4jServerError(
                    f"port {port} on {self.listen_address} is already in use by another process; "
                    "stop it or choose other --bolt-port/--http-port"
                )
        lib = ensure_jars(self.home, version=self.version)
        java = java or find_java(version=self.version)
        self.write_conf(lib)
        if self.auth and not self.initialised():
            assert password is not None
            self._set_initial_password(java, lib, password)
        cmd = self.command(java, lib)
        started = time.monotonic()
        log_fd = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(log_fd, "ab") as out:
            out.write(f"\n---- graphmem: starting Neo4j {self.version} ----\n".encode())
            out.flush()
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=self.data_dir,
                    start_new_session=True,
                    env=self._java_env(),
                    umask=PRIVATE_UMASK,
                )
            except OSError as e:
                raise Neo4jServerError(f"could not run {java}: {e}") from e
        write_private(self.pid_file, f"{proc.pid}\n")
        try:
            self.wait_ready(password, timeout=timeout, pid=proc.pid, proc=proc)
        except BaseException:
            self.stop(pid=proc.pid)
            raise
        seconds = time.monotonic() - started
        log.info("Neo4j started in %.1fs (pid %d)", seconds, proc.pid)
        return StartResult(proc.pid, seconds, reused=False)

    def wait_ready(
        self,
        password: str | None,
        *,
        timeout: float,
        pid: int,
        proc: subprocess.Popen[bytes] | None = None,
    ) -> None:
        """Poll until Bolt answers (driver) and HTTP listens, the process dies, or time is up."""
        import neo4j
        from neo4j.exceptions import AuthError, DriverError, Neo4jError

        auth = ("neo4j", password) if self.auth and password is not None else None
        deadline = time.monotonic() + timeout
        while True:
            exited = proc.poll() is not None if proc is not None else not _alive(pid)
            if exited:
                raise Neo4jServerError(
                    f"Neo4j exited during start-up; see {self.log_file}: {self._log_tail()}"
                )
            try:
                with neo4j.GraphDatabase.driver(
                    self.bolt_uri, auth=auth, connection_timeout=2.0
                ) as driver:
                    driver.verify_connectivity()
                # Bolt opens a few seconds before HTTP (and the Browser): wait for both.
                if _port_in_use(self.listen_address, self.http_port):
                    return
            except AuthError as e:
                raise Neo4jServerError(
                    f"Neo4j in {self.data_dir} rejected the password: a data directory keeps the "
                    "password it was first started with (use it, or a fresh --data-dir)"
                ) from e
            except (DriverError, Neo4jError, OSError):
                pass
            if time.monotonic() > deadline:
                raise Neo4jServerError(
                    f"Neo4j did not answer on {self.bolt_uri} within {timeout:.0f}s; "
                    f"see {self.log_file}"
                )
            time.sleep(0.5)

    def stop(self, *, timeout: float = 60.0, pid: int | None = None) -> bool:
        """SIGTERM the server, wait, SIGKILL after ``timeout``; False if it was not running."""
        pid = pid if pid is not None else self.running_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            log.warning("Neo4j (pid %d) ignored SIGTERM for %.0fs; killing it", pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        return True

    def status(self) -> ServerStatus:
        pid = self.running_pid()
        return ServerStatus(pid is not None, pid, self.bolt_uri, self.http_url, self.data_dir)

    def running_pid(self) -> int | None:
        """The pid in the pid file if that process is alive and is this instance's server."""
        try:
            pid = int(self.pid_file.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None
        if not _alive(pid):
            return None
        cmdline = _cmdline(pid)
        if cmdline is not None and (
            "org.neo4j.server." not in cmdline or f"--home-dir={self.data_dir}" not in cmdline
        ):
            return None  # the pid was reused by another process
        return pid

    def initialised(self) -> bool:
        """True once the server has run here (the initial password can no longer be set)."""
        return (self.data_dir / "data" / "databases" / "system").exists()

    # ---- files and command lines ----

    def prepare_dirs(self) -> None:
        """Create the instance's directories owner-only (0700): the data directory holds the
        databases, the auth store and the conf, none of them for other users' eyes."""
        make_private_dir(self.data_dir)
        for sub in ("conf", "data", "logs", "run"):
            make_private_dir(self.data_dir / sub)

    def write_conf(self, lib: Path) -> Path:
        """Render the packaged neo4j.conf template into this instance's conf directory."""
        template = Template((resource_dir() / "neo4j.conf").read_text(encoding="utf-8"))
        text = template.substitute(
            listen_address=self.listen_address,
            bolt_port=self.bolt_port,
            http_port=self.http_port,
            auth_enabled="true" if self.auth else "false",
            lib_dir=lib,
            heap_initial=min(self.heap, DEFAULT_HEAP_INITIAL, key=memory_bytes),
            heap_max=self.heap,
            pagecache=self.pagecache,
        )
        self.prepare_dirs()
        write_private(self.conf_file, text)
        return self.conf_file

    def command(self, java: Path, lib: Path) -> list[str]:
        """The java command line: heap and JVM options come from the rendered neo4j.conf."""
        settings = read_conf(self.conf_file)
        jvm: list[str] = []
        if "server.memory.heap.initial_size" in settings:
            jvm.append("-Xms" + settings["server.memory.heap.initial_size"][-1])
        if "server.memory.heap.max_size" in settings:
            jvm.append("-Xmx" + settings["server.memory.heap.max_size"][-1])
        jvm.extend(settings.get("server.jvm.additional", []))
        return [
            str(java),
            *jvm,
            "-cp",
            f"{lib}/*",
            entry_point(lib),
            f"--home-dir={self.data_dir}",
            f"--config-dir={self.conf_file.parent}",
            "--console-mode",
        ]

    def _java_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["NEO4J_HOME"] = str(self.data_dir)
        env["NEO4J_CONF"] = str(self.conf_file.parent)
        return env

    def _set_initial_password(self, java: Path, lib: Path, password: str) -> None:
        """``neo4j-admin dbms set-initial-password`` without the password on any command line.

        Neo4j's admin bootloader would fork a JVM with the password as an argument (visible in
        ``ps``); running AdminTool directly from a private Java argument file avoids that.
        """
        conf_dir = self.conf_file.parent
        fd, argfile = tempfile.mkstemp(prefix="graphmem-neo4j-", suffix=".args", dir=conf_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(f'-cp "{_argfile_quote(f"{conf_dir}/*:{lib}/*")}"\n')
                out.write("-Dfile.encoding=UTF-8\n")
                out.write(f"{ADMIN_TOOL}\ndbms\nset-initial-password\n")
                out.write(f'"{_argfile_quote(password)}"\n')
            done = subprocess.run(
                [str(java), f"@{argfile}"],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                env=self._java_env(),
                cwd=self.data_dir,
                umask=PRIVATE_UMASK,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Neo4jServerError(
                f"setting the initial password failed: {type(e).__name__}"
            ) from e
        finally:
            Path(argfile).unlink(missing_ok=True)
        if done.returncode != 0:
            # AdminTool's output names the problem (e.g. a too-short password), never the value.
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            raise Neo4jServerError("setting the initial password failed: " + " ".join(detail))

    def _log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30}


def check_memory_size(what: str, size: str) -> str:
    """A JVM-style size such as ``512m`` or ``4g`` (at least 64m), lower-cased; else ConfigError."""
    text = size.strip().lower() if isinstance(size, str) else ""
    if not (text[:-1].isdigit() and text[-1:] in _UNITS):
        raise ConfigError(f"the {what} size must look like 512m or 4g, got {size!r}")
    if memory_bytes(text) < 64 * 2**20:
        raise ConfigError(f"the {what} size must be at least 64m, got {size!r}")
    return text


def memory_bytes(size: str) -> int:
    """Bytes of a size checked by ``check_memory_size``."""
    return int(size[:-1]) * _UNITS[size[-1]]


def check_password(password: str | None) -> str:
    """Reject a missing or too-short password before anything starts (never echoing it)."""
    if not password:
        raise ConfigError(
            "Neo4j auth is on: give a password (--password, --password-env, or "
            "GRAPHMEM_NEO4J_PASSWORD), or start with --no-auth"
        )
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ConfigError(f"the Neo4j password must have at least {MIN_PASSWORD_LENGTH} characters")
    if "\n" in password or "\r" in password:
        raise ConfigError("the Neo4j password must be a single line")
    return password


def read_conf(path: Path) -> dict[str, list[str]]:
    """Settings of a neo4j.conf: every value of every key, in order (keys may repeat)."""
    out: dict[str, list[str]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def _argfile_quote(value: str) -> str:
    # Java argument files treat backslash as an escape inside quotes.
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie child is reaped and counts as gone)."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _cmdline(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace")
