"""Neo4j's jars and the Java that runs them, for :mod:`graphmem.neo4j_server`.

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
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path

from graphmem.errors import StoreError

log = logging.getLogger(__name__)

SUPPORTED_JAVA = (17, 21)
"""Java versions Neo4j 5.26 runs on (17 is preferred; newer JDKs are rejected)."""


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


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """The jar cache: ``GRAPHMEM_NEO4J_HOME`` or ``~/.cache/graphmem/neo4j/<version>``."""
    e = os.environ if env is None else env
    if e.get("GRAPHMEM_NEO4J_HOME"):
        return Path(e["GRAPHMEM_NEO4J_HOME"]).expanduser()
    return Path.home() / ".cache" / "graphmem" / "neo4j" / neo4j_version()


# ---- jars ------------------------------------------------------------------------------------


def _pom_digest() -> str:
    return hashlib.sha256((resource_dir() / "pom.xml").read_bytes()).hexdigest()[:16]


def jars_present(home: Path) -> bool:
    """True when ``home/lib`` holds a complete copy of the jars the packaged pom names."""
    marker = home / "lib" / ".graphmem-complete"
    return marker.is_file() and marker.read_text(encoding="utf-8").strip() == _pom_digest()


def ensure_jars(home: Path, *, mvn: str | None = None, timeout: float = 1800.0) -> Path:
    """Make sure ``home/lib`` holds Neo4j's jars, running Maven only when they are missing.

    Maven copies into ``lib.partial`` first, renamed on success, so an interrupted download never
    leaves a half-filled ``lib`` that looks complete. Returns the lib directory.
    """
    lib = home / "lib"
    if jars_present(home):
        return lib
    home.mkdir(parents=True, exist_ok=True)
    with file_lock(home / ".lock"):
        if jars_present(home):  # another process fetched them while we waited
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
        shutil.copyfile(resource_dir() / "pom.xml", pom)
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
        log.info("fetching Neo4j %s jars with Maven into %s", neo4j_version(), lib)
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
        (partial / ".graphmem-complete").write_text(_pom_digest() + "\n", encoding="utf-8")
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


def find_java(env: Mapping[str, str] | None = None) -> Path:
    """A Java 17 (or 21) binary: JAVA_HOME if it is one, else /usr/lib/jvm, else ``java``.

    Machines often carry a newer JDK too (e.g. Temurin 25) that Neo4j 5.26 refuses, so the
    version is checked rather than trusting the default ``java``.
    """
    e = os.environ if env is None else env
    candidates: list[Path] = []
    for var in ("GRAPHMEM_JAVA_HOME", "JAVA_HOME"):
        if e.get(var):
            candidates.append(Path(e[var]) / "bin" / "java")
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        for pattern in ("java-17*", "*-17*", "*17*", "java-21*", "*21*"):
            candidates.extend(sorted(p / "bin" / "java" for p in jvm.glob(pattern)))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path))
    seen: set[Path] = set()
    for java in candidates:
        if java in seen or not java.is_file():
            continue
        seen.add(java)
        if java_major(java) in SUPPORTED_JAVA:
            return java
    raise Neo4jServerError(
        "Neo4j 5.26 needs Java 17 (or 21); none found in JAVA_HOME, /usr/lib/jvm or PATH "
        "(install openjdk-17-jre-headless, or set GRAPHMEM_JAVA_HOME)"
    )
