"""The file format the embedded store's saved indexes share (the approximate index, ``ann``;
the keyword index, ``fulltext_files``): one JSON header line naming the format and carrying the
body's crc32, then the body. Written to a temp file renamed over the target (atomic; no fsync:
an index lost in a crash is built again from the data)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any


def write_checked(path: Path, file_format: str, header: dict[str, Any], body: bytes) -> None:
    """``header`` (with the format and the body's crc32 added) and ``body`` written over
    ``path`` atomically."""
    head = {"format": file_format, **header, "crc32": f"{zlib.crc32(body):08x}"}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(json.dumps(head, separators=(",", ":")).encode("ascii") + b"\n")
            out.write(body)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def read_checked(
    path: Path, file_format: str, what: str, unit: str
) -> tuple[dict[str, Any], bytes]:
    """Header and body of a file of ``file_format``; ValueError if it is damaged: "no {what}
    header", or a checksum mismatch over its body ("… {unit} bytes")."""
    data = path.read_bytes()
    line, sep, body = data.partition(b"\n")
    try:
        header = json.loads(line) if sep else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != file_format:
        raise ValueError(f"no {what} header")
    if header.get("crc32") != f"{zlib.crc32(body):08x}":
        raise ValueError(f"checksum mismatch over its {len(body)} {unit} bytes")
    return header, body
