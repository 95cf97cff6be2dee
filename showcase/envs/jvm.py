"""Find a Java 17 runtime and start the text-game JVMs with it.

TextWorldExpress and ScienceWorld start their JVM through py4j's ``launch_gateway`` with
``java_path="java"``, i.e. whatever ``java`` is first on ``PATH``; on machines with several JDKs
that may not be 17. :func:`launching_with_java` pins the binary for one constructor call.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from graphmem.errors import GraphmemError, InvalidInput

log = logging.getLogger(__name__)

_LAUNCH_LOCK = threading.Lock()
_VERSION_RE = re.compile(r'version "(\d+)(?:\.(\d+))?')


class EnvError(GraphmemError):
    """A text-game environment failed or was used out of order (e.g. step before reset)."""


class JavaNotFound(EnvError):
    """No Java 17 runtime was found; the text-game environments need one."""


class InvalidEnvInput(EnvError, InvalidInput):
    """An environment was given an unknown game, task, fold or parameter."""


def java_major_version(java: str) -> int | None:
    """The major version of the ``java`` binary at ``java``, or None if it does not run."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_RE.search(out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    # Java 8 and older report "1.8.0_..."
    return int(match.group(2) or 0) if major == 1 else major


def _candidates() -> Iterator[str]:
    for var in ("GRAPHMEM_JAVA", "JAVA_HOME"):
        value = os.environ.get(var)
        if value:
            path = Path(value)
            yield str(path / "bin" / "java") if path.is_dir() else str(path)
    on_path = shutil.which("java")
    if on_path:
        yield on_path
    yield from sorted(str(p) for p in Path("/usr/lib/jvm").glob("*17*/bin/java"))


@functools.cache
def find_java17() -> str:
    """Path of a Java 17 binary: $GRAPHMEM_JAVA, $JAVA_HOME, ``java`` on PATH, /usr/lib/jvm."""
    tried: list[str] = []
    for candidate in _candidates():
        version = java_major_version(candidate)
        tried.append(f"{candidate} ({version or 'not runnable'})")
        if version == 17:
            log.debug("using Java 17 at %s", candidate)
            return candidate
    raise JavaNotFound(
        "Java 17 is required for the text-game environments; tried: "
        + (", ".join(tried) or "nothing found")
        + ". Install openjdk-17 or set GRAPHMEM_JAVA to its java binary."
    )


def has_java17() -> bool:
    """Whether :func:`find_java17` succeeds (for skipping tests)."""
    try:
        find_java17()
    except JavaNotFound:
        return False
    return True


@contextmanager
def launching_with_java(module: ModuleType, java: str) -> Iterator[None]:
    """While inside, ``module.launch_gateway`` starts the JVM with the binary ``java``."""
    with _LAUNCH_LOCK:
        original = getattr(module, "launch_gateway")  # noqa: B009 - untyped third-party module

        def launch(*args: Any, **kwargs: Any) -> Any:
            kwargs["java_path"] = java
            return original(*args, **kwargs)

        setattr(module, "launch_gateway", launch)  # noqa: B010
        try:
            yield
        finally:
            setattr(module, "launch_gateway", original)  # noqa: B010


def _already_closed() -> None:
    """What a closed environment's ``close`` becomes (see :func:`close_once`)."""


def close_once(env: Any, what: str) -> None:
    """Close a py4j-backed environment (TextWorldExpress, ScienceWorld) now, on this thread,
    and disarm its ``__del__``.

    Both libraries' ``__del__`` call ``close()`` again, wherever the garbage collector happens
    to collect the object. Under an asyncio server (``langgraph dev``) that is often the event
    loop's thread, so the second shutdown's socket calls reach the loop (blockbuster's
    ``BlockingError: Blocking call to socket.socket.connect``) and py4j logs the failures of
    shutting down a gateway twice (``Py4JNetworkError: Gateway is not connected``,
    ``AttributeError: 'NoneType' object has no attribute 'join'``) after a run that
    succeeded. An instance attribute shadows the method ``__del__`` looks up, so the second
    close does nothing.
    """
    try:
        env.close()
    except Exception as e:  # the JVM may already be gone; closing must not raise
        log.debug("closing %s: %s", what, e)
    finally:
        env.close = _already_closed
