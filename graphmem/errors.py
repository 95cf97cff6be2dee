"""One error root, specific leaves.

Every error graphmem raises on purpose is a :class:`GraphmemError`, itself a
:class:`RuntimeError` (see there why). Errors caused by the caller's input also subclass
:class:`ValueError`, so ``except ValueError`` keeps working.
Driver and I/O errors are wrapped ``from e`` so the original stays visible to debuggers while
users see one clear line.
"""

from __future__ import annotations


class GraphmemError(RuntimeError):
    """Root of every error graphmem raises on purpose.

    A :class:`RuntimeError`, so that LangGraph Server hands a served run's error message to the
    HTTP client: it passes on the message of a ValueError, KeyError, RuntimeError and a few more,
    and replaces any other's with "An internal error occurred". It is still caught by ``except
    GraphmemError``, by ``except Exception`` and by its own class; LangGraph's default
    ``RetryPolicy`` does not retry it (as with ValueError): what is transient, the stores and the
    LLM steps retry themselves.
    """


class InvalidInput(GraphmemError, ValueError):
    """The caller passed something graphmem cannot store or use; nothing was changed."""


class EmptyContent(InvalidInput):
    """A text field that must carry content was empty or whitespace."""

    def __init__(self, field: str) -> None:
        super().__init__(f"{field} must not be empty")
        self.field = field


class InvalidNamespace(InvalidInput):
    """A namespace is missing or uses characters outside the allowed set."""


class InvalidReward(InvalidInput):
    """A reward is not a number inside the config's reward range."""


class InvalidVector(InvalidInput):
    """An embedding has the wrong dimension or non-finite values."""


class DimensionMismatch(InvalidVector):
    """The embedder's dimension differs from the dimension the store was created with."""

    def __init__(self, expected: int, got: int, where: str = "store") -> None:
        super().__init__(
            f"embedding dimension mismatch: the {where} holds {expected}-dim vectors, got {got}"
        )
        self.expected = expected
        self.got = got


class EmbedderMismatch(GraphmemError, ValueError):
    """A namespace's vectors were made by another embedder than the one in use.

    Nothing was read or written with the wrong embedder. ``recorded`` and ``current`` describe
    the two embedders (name and dimension).
    """

    def __init__(self, namespace: str, recorded: str, current: str, *, pending: bool = False):
        if pending:
            text = (
                f"namespace {namespace!r} is half re-embedded with {recorded} (an unfinished "
                f"re-embed); finish it with `graphmem reembed --namespace {namespace}` and that "
                f"embedder before using it with {current}"
            )
        else:
            text = (
                f"namespace {namespace!r} was embedded with {recorded}, not {current}: use "
                f"{recorded}, or re-embed it with `graphmem reembed --namespace {namespace}` "
                "(graphmem.reembed in Python) and the embedder you want"
            )
        super().__init__(text)
        self.namespace = namespace
        self.recorded = recorded
        self.current = current
        self.pending = pending


class MemoryNotFound(GraphmemError, KeyError):
    """No memory with this id exists in this namespace."""

    def __init__(self, memory_id: str, namespace: str) -> None:
        super().__init__(memory_id)
        self.memory_id = memory_id
        self.namespace = namespace

    def __str__(self) -> str:
        return f"no memory {self.memory_id!r} in namespace {self.namespace!r}"


class ImportFormatError(InvalidInput):
    """A JSON Lines import line is malformed; nothing from the file was imported."""

    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(f"import line {line_no}: {reason}")
        self.line_no = line_no


class StoreError(GraphmemError):
    """The store could not complete an operation (I/O, driver or server failure)."""


class StoreLocked(StoreError):
    """Another process holds the store's lock for longer than we were willing to wait."""


class WriteConflict(GraphmemError):
    """A conditional write found a memory it was conditioned on changed by another writer
    (``upsert(..., expect_live=...)``: gone, obsolete, superseded or credited since it was
    read); nothing was written. Read again and decide again."""


class LLMError(GraphmemError):
    """The chat model failed or returned output that stayed invalid after the allowed retries."""


class ConfigError(GraphmemError, ValueError):
    """A configuration value (environment variable, preset name, option) is invalid."""


class EpisodeFinished(GraphmemError):
    """The episode was finished already with another reward; a reward is credited once.

    Finishing again with the *same* reward is not an error: it returns the recorded outcome.
    """

    def __init__(
        self,
        episode_id: str,
        namespace: str,
        reward: float | None = None,
        asked: float | None = None,
        *,
        detail: str = "",
    ) -> None:
        if reward is not None and asked is not None:
            detail = f" with reward {reward:g}; a different reward ({asked:g}) is refused"
        super().__init__(
            f"episode {episode_id!r} in namespace {namespace!r} is already finished{detail}; "
            "its reward was credited once and is not applied again"
        )
        self.episode_id = episode_id
        self.namespace = namespace
        self.reward = reward


class MissingExtra(GraphmemError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the
    extra to install (``pip install 'graphmem[neo4j]'``)."""
