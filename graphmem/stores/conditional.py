"""The condition of a conditional write: ``upsert(..., expect_live=[memories as read])``.

A writer that retires what it read (consolidation merging look-alikes, a note superseding the
ones it contradicts) must not retire them twice: two such writers racing would each write a
new version holding the same uses. Each store checks, inside the write's own transaction and
under its lock, that every memory the writer read is still as it was in what matters here,
and writes nothing (:class:`~graphmem.errors.WriteConflict`) when one is not.
"""

from __future__ import annotations

from graphmem.models import AnyMemory


def stale_read(read: AnyMemory, now: AnyMemory | None, superseded: bool) -> str | None:
    """Why the memory ``read`` (as the writer read it) no longer holds, ``now`` being its
    current value (None: deleted) and ``superseded`` whether another memory SUPERSEDES it; None
    when it is still live with the Q updates it was read with.

    >>> from graphmem.models import Note
    >>> read = Note(id="n1", namespace="ns", content="x", q_updates=2)
    >>> stale_read(read, read, False) is None
    True
    >>> stale_read(read, read.model_copy(update={"q_updates": 3}), False)
    "memory 'n1' in namespace 'ns' was credited since it was read (3 Q updates, not 2)"
    """
    where = f"memory {read.id!r} in namespace {read.namespace!r}"
    if now is None:
        return f"{where} was deleted since it was read"
    if now.obsolete or superseded:
        return f"{where} was retired since it was read ({now.obsolete_reason or 'superseded'})"
    if now.q_updates != read.q_updates:
        return (
            f"{where} was credited since it was read ({now.q_updates} Q updates, "
            f"not {read.q_updates})"
        )
    return None
