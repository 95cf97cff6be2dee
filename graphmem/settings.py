"""Settings from the environment, read in this one place (never at import time).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.settings``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphmem.config import LLM_OUTPUT_CHOICES
from graphmem.errors import ConfigError

if TYPE_CHECKING:
    from graphmem.embedding import Embedder
    from graphmem.llm import MemoryLLM
    from graphmem.memory import GraphMemory
    from graphmem.stores.base import MemoryStore


from graphmem.stores.neo4j.uri import (
    NEO4J_SCHEMES,
    check_neo4j_uri,
    redact_uri,
    shown_uri,
    unshowable,
)

__all__ = ["NEO4J_SCHEMES", "Settings", "check_neo4j_uri", "redact_uri"]


def _llm_limits(e: Mapping[str, str]) -> dict[str, Any]:
    """The LLM output mode, token cap, timeout and retries; a ConfigError names a bad value."""

    def number(name: str, default: str, kind: type[int] | type[float], low: float) -> Any:
        text = e.get(name, "").strip() or default
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise ConfigError(f"{name} must be a number >= {low:g}, not {text[:40]!r}")
        return value

    output = e.get("GRAPHMEM_LLM_OUTPUT", "").strip().lower() or "auto"
    if output not in LLM_OUTPUT_CHOICES:
        choices = ", ".join(LLM_OUTPUT_CHOICES)
        raise ConfigError(f"GRAPHMEM_LLM_OUTPUT must be one of {choices}, not {output[:40]!r}")
    field_name = e.get("GRAPHMEM_LLM_MAX_TOKENS_FIELD", "").strip() or "max_tokens"
    if field_name not in ("max_tokens", "max_completion_tokens"):
        raise ConfigError(
            "GRAPHMEM_LLM_MAX_TOKENS_FIELD must be max_tokens (llama.cpp, vLLM, Ollama) or "
            f"max_completion_tokens (OpenAI reasoning models), not {field_name[:40]!r}"
        )
    timeout = number("GRAPHMEM_LLM_TIMEOUT", "30", float, 0.001)
    return {
        "llm_output": output,
        "llm_max_tokens": number("GRAPHMEM_LLM_MAX_TOKENS", "1024", int, 0) or None,
        "llm_max_tokens_field": field_name,
        "llm_timeout": timeout,
        "llm_retries": number("GRAPHMEM_LLM_RETRIES", "2", int, 0),
    }


ANN_THRESHOLD = 20_000  # stores.embedded.vectors.DEFAULT_ANN_THRESHOLD (tests keep them equal)


def check_llm_url(url: str) -> str:
    """``GRAPHMEM_LLM_BASE_URL`` if it is an http(s) URL, else a ConfigError that shows it only
    masked, or not at all when it does not parse (it may carry an API key)."""
    why = unshowable(url)
    if why is not None:
        raise ConfigError(
            f"unusable GRAPHMEM_LLM_BASE_URL (not shown: {why}): write it as "
            "http://HOST:PORT/v1, and put an API key in GRAPHMEM_LLM_API_KEY"
        )
    if not url.lower().startswith(("http://", "https://")):
        raise ConfigError(
            f"unusable GRAPHMEM_LLM_BASE_URL {shown_uri(url)[:200]!r}: it must start with "
            "http:// or https://, e.g. http://127.0.0.1:8080/v1"
        )
    return url


def _ann_threshold(text: str) -> int | None:
    """``GRAPHMEM_ANN_THRESHOLD``: a positive integer, or ``off`` (default 20000)."""
    text = text.strip().lower()
    if not text:
        return ANN_THRESHOLD
    if text == "off":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(
            f"GRAPHMEM_ANN_THRESHOLD must be a positive integer or 'off', not {text[:40]!r}"
        )
    return int(text)


def _flag(name: str, raw: str) -> bool:
    """An on/off environment variable: 1/true/yes/on or 0/false/no/off (empty: off)."""
    value = raw.strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{name} must be on or off (1/0, true/false, yes/no), not {raw!r}")


def _retry_s(text: str) -> float:
    """``GRAPHMEM_NEO4J_RETRY_S``: seconds, positive and finite (default 120)."""
    if not text.strip():
        return 120.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise ConfigError(f"GRAPHMEM_NEO4J_RETRY_S must be a positive number, not {text[:40]!r}")
    return value


@dataclass(frozen=True)
class Settings:
    store_path: Path = Path("graphmem-data")
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str | None = field(default=None, repr=False)
    neo4j_database: str = "neo4j"
    neo4j_retry_s: float = 120.0
    embedder: str = "minilm"
    ann_threshold: int | None = ANN_THRESHOLD
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_output: str = "auto"
    llm_max_tokens: int | None = 1024
    llm_max_tokens_field: str = "max_tokens"
    llm_timeout: float = 30.0
    llm_retries: int = 2
    abstain: bool = False
    """``GRAPHMEM_ABSTAIN``: retrieval withholds memories not expected to beat no memory."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        embedder = e.get("GRAPHMEM_EMBEDDER", "").strip().lower() or "minilm"
        if embedder not in ("minilm", "hashing"):
            raise ConfigError(f"GRAPHMEM_EMBEDDER must be 'minilm' or 'hashing', not {embedder!r}")
        neo4j_uri = check_neo4j_uri(uri) if (uri := e.get("GRAPHMEM_NEO4J_URI")) else None
        store = e.get("GRAPHMEM_STORE", "graphmem-data")
        if not store.strip() and neo4j_uri is None:
            # An unset variable expanded (GRAPHMEM_STORE=$DIR): the working directory is no store.
            raise ConfigError(
                "GRAPHMEM_STORE is set but empty: name the store's directory, or unset it for "
                "./graphmem-data"
            )
        return cls(
            store_path=Path(store),
            neo4j_uri=neo4j_uri,
            neo4j_user=e.get("GRAPHMEM_NEO4J_USER", "neo4j"),
            neo4j_password=e.get("GRAPHMEM_NEO4J_PASSWORD") or None,
            neo4j_database=e.get("GRAPHMEM_NEO4J_DATABASE", "neo4j"),
            neo4j_retry_s=_retry_s(e.get("GRAPHMEM_NEO4J_RETRY_S", "")),
            embedder=embedder,
            ann_threshold=_ann_threshold(e.get("GRAPHMEM_ANN_THRESHOLD", "")),
            llm_base_url=check_llm_url(url) if (url := e.get("GRAPHMEM_LLM_BASE_URL")) else None,
            llm_model=e.get("GRAPHMEM_LLM_MODEL") or None,
            llm_api_key=e.get("GRAPHMEM_LLM_API_KEY") or e.get("OPENAI_API_KEY") or None,
            **_llm_limits(e),
            abstain=_flag("GRAPHMEM_ABSTAIN", e.get("GRAPHMEM_ABSTAIN", "")),
        )

    @property
    def backend(self) -> str:
        return "neo4j" if self.neo4j_uri else "embedded"

    def open_store(self, *, create: bool = True) -> MemoryStore:
        """The store these settings name: Neo4j when a URI is set, else the embedded store.

        ``create=False`` (the read-only commands): an embedded store path that does not exist
        is a one-line error that creates nothing (a mistyped ``GRAPHMEM_STORE`` must not leave
        an empty store behind and report "no memories yet").
        """
        if self.neo4j_uri:
            from graphmem.stores.neo4j import Neo4jStore

            return Neo4jStore.from_uri(
                self.neo4j_uri,
                user=self.neo4j_user,
                password=self.neo4j_password,
                database=self.neo4j_database,
                retry_for=self.neo4j_retry_s,
            )
        from graphmem.stores.embedded import EmbeddedStore

        if not create and not self.store_path.exists():
            from graphmem.errors import StoreError

            raise StoreError(
                f"no store at {self.store_path} (GRAPHMEM_STORE, or GRAPHMEM_NEO4J_URI for Neo4j); "
                "nothing was created"
            )
        return EmbeddedStore.open(self.store_path, ann_threshold=self.ann_threshold)

    def make_embedder(self) -> Embedder:
        from graphmem.embedding import HashingEmbedder, SentenceTransformerEmbedder

        return HashingEmbedder() if self.embedder == "hashing" else SentenceTransformerEmbedder()

    def make_llm(self) -> MemoryLLM | None:
        if not self.llm_base_url:
            return None
        from graphmem.llm import MemoryLLM

        return MemoryLLM.from_openai(
            base_url=self.llm_base_url,
            model=self.llm_model or "default",
            api_key=self.llm_api_key or "not-needed",
            output=self.llm_output,
            max_tokens=self.llm_max_tokens,
            max_tokens_field=self.llm_max_tokens_field,
            timeout=self.llm_timeout,
            retries=self.llm_retries,
        )

    def open_memory(self) -> GraphMemory:
        from graphmem.config import MemoryConfig, RetrievalConfig
        from graphmem.memory import GraphMemory

        config = MemoryConfig(retrieval=RetrievalConfig(abstain=True)) if self.abstain else None
        return GraphMemory(
            self.open_store(), embedder=self.make_embedder(), llm=self.make_llm(), config=config
        )
