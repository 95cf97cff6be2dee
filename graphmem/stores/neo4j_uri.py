"""Neo4j connection URIs: which ones graphmem accepts, and how they are shown without secrets."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from graphmem.errors import ConfigError

NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
"""URI schemes graphmem connects to Neo4j with (Bolt, direct or routed)."""

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)\S*@")
"""A URI's userinfo, up to the last ``@`` of the word: a password may hold ``@`` or ``/``."""


_QUERY_SECRET = re.compile(
    r"(?P<key>[?&;](?:password|passwd|pwd|pass|secret|token|auth|credentials|api[_-]?key|key)=)"
    r"[^&;#\s'\"]*",
    re.IGNORECASE,
)
"""A secret passed as a URI query parameter (``bolt://host/?password=X``)."""


def redact_uri(text: str) -> str:
    """``text`` with the credentials of every URI in it replaced by ``***``: the userinfo and
    any query parameter that carries a secret.

    >>> redact_uri("cannot reach bolt://neo4j:secret@db:7687")
    'cannot reach bolt://***@db:7687'
    >>> redact_uri("unusable Neo4j URI 'bolt://db/?password=s3cret&x=1'")
    "unusable Neo4j URI 'bolt://db/?password=***&x=1'"
    """
    return _QUERY_SECRET.sub(r"\g<key>***", _USERINFO.sub(r"\g<scheme>***@", text))


def check_neo4j_uri(uri: str) -> str:
    """``uri`` if graphmem can connect with it, else a ConfigError that says what to change.

    Credentials never appear in the message (nor belong in the URI).
    """
    shown = redact_uri(uri)[:200]
    try:
        parts = urlsplit(uri)
        port = parts.port  # raises ValueError for a port that is not a number in 0..65535
    except ValueError as e:
        raise ConfigError(f"unusable Neo4j URI {shown!r}: {e}") from e
    if parts.scheme.lower() not in NEO4J_SCHEMES:
        raise ConfigError(
            f"unusable Neo4j URI {shown!r}: the scheme must be one of "
            f"{', '.join(s + '://' for s in NEO4J_SCHEMES)}, e.g. bolt://127.0.0.1:7687"
        )
    if "@" in parts.netloc:
        raise ConfigError(
            f"unusable Neo4j URI {shown!r}: put the user and password in GRAPHMEM_NEO4J_USER "
            "and GRAPHMEM_NEO4J_PASSWORD, not in the URI"
        )
    if not parts.hostname or port == 0:
        raise ConfigError(
            f"unusable Neo4j URI {shown!r}: name a host (and a port), e.g. bolt://127.0.0.1:7687"
        )
    return uri
