"""Connection URIs: which Neo4j ones graphmem accepts, and how any URI (Neo4j's, the LLM
endpoint's) is shown without the credentials it carries."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from graphmem.errors import ConfigError

NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
"""URI schemes graphmem connects to Neo4j with (Bolt, direct or routed)."""

_URI = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>]*)")
"""A URI in running text: a scheme, then everything up to a blank or a quote."""

SECRET_WORDS = (
    "pass",
    "pw",
    "secret",
    "token",
    "key",
    "auth",
    "cred",
    "sig",
    "session",
    "cookie",
    "bearer",
)
"""A query parameter whose (decoded, lower-cased) name contains one of these carries a secret:
``password``, ``passwd``, ``pwd``, ``pw``, ``api_key``, ``apikey``, ``X-Api-Key``,
``access_token``, ``auth``, ``credentials``, ``sig`` …"""


def secret_key(key: str) -> bool:
    """Whether a query parameter named ``key`` carries a secret (see :data:`SECRET_WORDS`)."""
    name = unquote_plus(key).lower()
    return any(word in name for word in SECRET_WORDS)


def _redact_one(match: re.Match[str]) -> str:
    rest = match["rest"]
    # The userinfo runs to the last "@" of the word: a password may hold "@", "/", "?" or "#".
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    rest, hashed, fragment = rest.partition("#")
    path, asked, query = rest.partition("?")
    if asked:
        rest = path + asked + _redact_query(query)
    # A fragment never reaches the server, and a password put there must not be shown either.
    return match["scheme"] + rest + (hashed + "***" if fragment else hashed)


def _redact_query(query: str) -> str:
    """A query string with the values of its secret parameters masked; a part without ``=``
    right after a secret one is taken as the rest of its value (``password=a&b``)."""
    out: list[str] = []
    masking = False
    for part in re.split(r"([&;])", query):
        if part in ("&", ";"):
            out.append(part)
            continue
        key, eq, _ = part.partition("=")
        if eq:
            masking = secret_key(key)
            out.append(f"{key}=***" if masking else part)
        else:
            out.append("***" if masking and part else part)
    return "".join(out)


def redact_uri(text: str) -> str:
    """``text`` with the credentials of every URI in it replaced by ``***``: the userinfo, any
    query parameter whose name says it holds a secret, and the fragment.

    >>> redact_uri("cannot reach bolt://neo4j:secret@db:7687")
    'cannot reach bolt://***@db:7687'
    >>> redact_uri("unusable Neo4j URI 'bolt://db/?password=s3cret&x=1'")
    "unusable Neo4j URI 'bolt://db/?password=***&x=1'"
    >>> redact_uri("bolt://db:7687?pw=a&region=eu#password=b")
    'bolt://db:7687?pw=***&region=eu#***'
    """
    return _URI.sub(_redact_one, text)


_PARSED = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>\\`\x00-\x1f\x7f]*")
"""A URI :func:`redact_uri` can take apart: a scheme, ``://``, then no blank, quote or control
character (where a password with one of them ends cannot be told)."""

_BARE_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?/?")
"""A host and port alone (``127.0.0.1:7687``): nothing in it can be a secret."""


def unshowable(uri: str) -> str | None:
    """Why the setting ``uri`` cannot be shown even masked, or None when :func:`shown_uri`
    shows it. A value that does not parse as ``scheme://…`` without blanks or quotes cannot be
    told apart from the password it may carry (``bolt://neo4j:pa ss@host``, ``neo4j:pw@host``,
    ``127.0.0.1:1?password=pw``), so none of it is echoed."""
    if _PARSED.fullmatch(uri) or _BARE_HOST.fullmatch(uri):
        return None
    if re.search(r"[\s'\"<>\\`\x00-\x1f\x7f]", uri):
        return "it holds a blank, a quote or a control character"
    return "it does not start with scheme://"


def shown_uri(uri: str) -> str:
    """One URI setting's whole value as it may be shown: its credentials masked
    (:func:`redact_uri`), or, when it does not parse (:func:`unshowable`), nothing of it.

    >>> shown_uri("bolt://neo4j:secret@db:7687")
    'bolt://***@db:7687'
    >>> shown_uri("bolt://neo4j:pa ss@db")
    '<not shown: it holds a blank, a quote or a control character>'
    >>> shown_uri("neo4j:secret@db")
    '<not shown: it does not start with scheme://>'
    """
    why = unshowable(uri)
    return redact_uri(uri) if why is None else f"<not shown: {why}>"


def check_neo4j_uri(uri: str) -> str:
    """``uri`` if graphmem can connect with it, else a ConfigError that says what to change.

    Credentials never appear in the message (nor belong in the URI); a URI that does not parse
    is not shown at all (:func:`unshowable`).
    """
    why = unshowable(uri)
    if why is not None:
        raise ConfigError(
            f"unusable Neo4j URI (not shown: {why}): write it as bolt://HOST:PORT, e.g. "
            "bolt://127.0.0.1:7687, and put the user and password in GRAPHMEM_NEO4J_USER and "
            "GRAPHMEM_NEO4J_PASSWORD"
        )
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
    secrets = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if secret_key(k)]
    if secrets or parts.fragment:
        where = f"a query parameter {secrets[0]!r}" if secrets else "a fragment (#...)"
        raise ConfigError(
            f"unusable Neo4j URI {shown!r}: it carries {where}, which Neo4j does not read; put "
            "the password in GRAPHMEM_NEO4J_PASSWORD, not in the URI"
        )
    if not parts.hostname or port == 0:
        raise ConfigError(
            f"unusable Neo4j URI {shown!r}: name a host (and a port), e.g. bolt://127.0.0.1:7687"
        )
    return uri
