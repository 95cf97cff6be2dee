"""Neo4j's jars and the Java that runs them, for :mod:`graphmem.launcher.server`.

The packaged ``pom.xml`` (``graphmem/resources/neo4j``, linked as ``docker/pom.xml``) names the
jars; Maven copies them once into a cached Neo4j home. Java is looked for explicitly because
machines often carry a newer JDK too that Neo4j 5.26 does not run on.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path

from graphmem.errors import ConfigError, StoreError

log = logging.getLogger(__name__)

SUPPORTED_JAVA = (17, 21)
"""Java versions Neo4j 5.x runs on (17 is preferred; newer JDKs are rejected)."""

CALENDAR_JAVA = (21, 25)
"""Java versions the calendar-versioned releases (2025.01 on) run on (21 preferred)."""

_VERSION = re.compile(r"^(?:5\.\d{1,2}\.\d{1,3}|20\d\d\.\d{2}\.\d{1,3})$")
ENTRY_POINT_SERVICE = "META-INF/services/org.neo4j.server.startup.EntryPoint"
DEFAULT_ENTRY_POINT = "org.neo4j.server.CommunityEntryPoint"


class Neo4jServerError(StoreError):
    """The local Neo4j server could not be fetched, started, reached or stopped."""


def resource_dir() -> Path:
    """The packaged pom.xml, neo4j.conf template and schema files (docker/ links to them)."""
    return Path(str(resources.files("graphmem") / "resources" / "neo4j"))


def neo4j_version() -> str:
    """The Neo4j version the packaged pom.xml pins."""
    pom = (resource_dir() / "pom.xml").read_text(encoding="utf-8")
    match = re.search(r"<neo4j\.version>([^<]+)</neo4j\.version>", pom)
    if match is None:  # pragma: no cover - the packaged pom always pins it
        raise Neo4jServerError("the packaged pom.xml does not pin <neo4j.version>")
    return match.group(1).strip()


def check_version(version: str | None) -> str:
    """A Neo4j release to run: 5.x (e.g. ``5.26.30``) or calendar-versioned (``2026.09.0``);
    None means the packaged default. Anything else is a ConfigError."""
    if version is None:
        return neo4j_version()
    if not isinstance(version, str) or not _VERSION.match(version):
        raise ConfigError(
            f"unsupported Neo4j version {str(version)[:40]!r}: give a release such as "
            f"{neo4j_version()} (the default, LTS) or 2026.09.0"
        )
    return version


def calendar_release(version: str) -> bool:
    """True for the calendar-versioned releases (2025.01 and later), which need Java 21+."""
    return int(version.split(".")[0]) >= 2025


def java_versions(version: str | None = None) -> tuple[int, ...]:
    """The Java majors a Neo4j release runs on, preferred first."""
    return CALENDAR_JAVA if calendar_release(check_version(version)) else SUPPORTED_JAVA


def default_home(env: Mapping[str, str] | None = None, version: str | None = None) -> Path:
    """The jar cache: ``GRAPHMEM_NEO4J_HOME`` or ``~/.cache/graphmem/neo4j/<version>``."""
    e = os.environ if env is None else env
    if e.get("GRAPHMEM_NEO4J_HOME"):
        return Path(e["GRAPHMEM_NEO4J_HOME"]).expanduser()
    return Path.home() / ".cache" / "graphmem" / "neo4j" / check_version(version)


# ---- jars ------------------------------------------------------------------------------------


def pom_text(version: str | None = None) -> str:
    """The packaged pom.xml, pinned to ``version`` (the Browser jar stays as packaged)."""
    text = (resource_dir() / "pom.xml").read_text(encoding="utf-8")
    wanted = check_version(version)
    return text.replace(f">{neo4j_version()}</", f">{wanted}</")


def _pom_digest(version: str | None = None) -> str:
    return hashlib.sha256(pom_text(version).encode("utf-8")).hexdigest()[:16]


def jars_present(home: Path, version: str | None = None) -> bool:
    """True when ``home/lib`` holds a complete copy of the jars the pom of ``version`` names."""
    marker = home / "lib" / ".graphmem-complete"
    return marker.is_file() and marker.read_text(encoding="utf-8").strip() == _pom_digest(version)


def entry_point(lib: Path) -> str:
    """The server's main class, as the release's own jar declares it (5.x and 2026.x differ)."""
    for jar in sorted(lib.glob("neo4j-[0-9]*.jar")):
        try:
            with zipfile.ZipFile(jar) as archive:
                names = archive.read(ENTRY_POINT_SERVICE).decode("utf-8").split()
        except (KeyError, OSError, zipfile.BadZipFile):
            continue
        if names:
            return names[0]
    return DEFAULT_ENTRY_POINT


def ensure_jars(
    home: Path,
    *,
    version: str | None = None,
    mvn: str | None = None,
    timeout: float = 1800.0,
) -> Path:
    """Make sure ``home/lib`` holds the jars of Neo4j ``version`` (default: the packaged one),
    running Maven only when they are missing.

    Maven copies into ``lib.partial`` first, renamed on success, so an interrupted download never
    leaves a half-filled ``lib`` that looks complete. Returns the lib directory.
    """
    version = check_version(version)
    lib = home / "lib"
    if jars_present(home, version):
        return lib
    home.mkdir(parents=True, exist_ok=True)
    with file_lock(home / ".lock"):
        if jars_present(home, version):  # another process fetched them while we waited
            return lib
        mvn = mvn or shutil.which("mvn")
        if mvn is None:
            raise Neo4jServerError(
                "Maven (mvn) is needed once to fetch Neo4j's jars from Maven Central; "
                "install it (e.g. apt-get install maven) or point GRAPHMEM_NEO4J_HOME at a "
                "filled Neo4j home"
            )
        # Maven writes target/ beside the pom: run it on a copy in the cache, not in the package.
        pom = home / "pom.xml"
        pom.write_text(pom_text(version), encoding="utf-8")
        partial = home / "lib.partial"
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            "-q",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={partial}",
            "-f",
            str(pom),
        ]
        log.info("fetching Neo4j %s jars with Maven into %s", version, lib)
        started = time.monotonic()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Neo4jServerError(f"running Maven failed: {e}") from e
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise Neo4jServerError(
                f"Maven could not fetch Neo4j's jars (exit {done.returncode}): " + " | ".join(tail)
            )
        shutil.rmtree(home / "target", ignore_errors=True)
        (partial / ".graphmem-complete").write_text(_pom_digest(version) + "\n", encoding="utf-8")
        shutil.rmtree(lib, ignore_errors=True)
        partial.rename(lib)
        log.info("Neo4j jars fetched in %.1fs", time.monotonic() - started)
    return lib


def dir_size(path: Path) -> int:
    """Total bytes of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # owner-only, like the rest
    with os.fdopen(fd, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---- java ------------------------------------------------------------------------------------


def java_major(java: Path) -> int | None:
    """The major version of a ``java`` binary, or None if it does not run."""
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def find_java(env: Mapping[str, str] | None = None, version: str | None = None) -> Path:
    """A Java that Neo4j ``version`` runs on: JAVA_HOME if it is one, else /usr/lib/jvm, else
    ``java``; 17 (or 21) for 5.x, 21 (or 25) for the calendar-versioned releases.

    Machines often carry several JDKs (e.g. Java 17 and Temurin 25) and Neo4j refuses the wrong
    one, so the version is checked rather than trusting the default ``java``.
    """
    e = os.environ if env is None else env
    wanted = java_versions(version)
    candidates: list[Path] = []
    for var in ("GRAPHMEM_JAVA_HOME", "JAVA_HOME"):
        if e.get(var):
            candidates.append(Path(e[var]) / "bin" / "java")
    explicit = len(candidates)
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        for major in wanted:
            for pattern in (f"java-{major}*", f"*-{major}*", f"*{major}*"):
                candidates.extend(sorted(p / "bin" / "java" for p in jvm.glob(pattern)))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path))
    seen: set[Path] = set()
    found: dict[int, Path] = {}
    for n, java in enumerate(candidates):
        if java in seen or not java.is_file():
            continue
        seen.add(java)
        got = java_major(java)
        if got is not None and got in wanted:
            if n < explicit:  # a suitable GRAPHMEM_JAVA_HOME / JAVA_HOME wins outright
                return java
            found.setdefault(got, java)
    for major in wanted:
        if major in found:
            return found[major]
    versions = " or ".join(str(m) for m in wanted)
    raise Neo4jServerError(
        f"Neo4j {check_version(version)} needs Java {versions}; none found in JAVA_HOME, "
        "/usr/lib/jvm or PATH (install a matching JDK, or set GRAPHMEM_JAVA_HOME)"
    )
