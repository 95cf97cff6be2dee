"""Pictures of the memory graph: procedural chains, episodes and neighbourhoods.

Collect a :class:`Subgraph` from any store, then render it as a self-contained interactive HTML
page, Mermaid, Graphviz DOT or PNG:

>>> from graphmem.stores.embedded import EmbeddedStore
>>> from graphmem.models import Task
>>> store = EmbeddedStore.in_memory()
>>> task = Task(namespace="demo", text="Boil an egg", key="boil egg")
>>> store.upsert([task])
>>> render(task_subgraph(store, "demo", task.id), "mermaid").splitlines()[0]
'flowchart TB'
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from graphmem.errors import InvalidInput
from graphmem.viz.dot import to_dot
from graphmem.viz.graph import Subgraph, VizEdge, VizError, VizNode, static_view
from graphmem.viz.html import to_html
from graphmem.viz.mermaid import to_mermaid
from graphmem.viz.png import to_png
from graphmem.viz.subgraph import episode_subgraph, memory_subgraph, task_subgraph

Format = Literal["html", "mermaid", "dot", "png"]
FORMATS: tuple[Format, ...] = ("html", "mermaid", "dot", "png")

SUFFIX_FORMATS: dict[str, Format] = {
    ".html": "html",
    ".htm": "html",
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".md": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".png": "png",
}


def format_for(path: str | Path, fmt: str | None = None) -> Format:
    """The format asked for, or the one the file's suffix implies (default html)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InvalidInput(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        return fmt
    return SUFFIX_FORMATS.get(Path(path).suffix.lower(), "html")


def render(sub: Subgraph, fmt: Format | str = "html") -> str | bytes:
    """The picture in ``fmt``: text for html / mermaid / dot, PNG bytes for png."""
    chosen = format_for("", fmt)
    if chosen == "html":
        return to_html(sub)
    sub = static_view(sub)  # what a picture without hover can show legibly
    if chosen == "mermaid":
        return to_mermaid(sub)
    if chosen == "dot":
        return to_dot(sub)
    return to_png(sub)


def write(sub: Subgraph, path: str | Path, fmt: Format | str | None = None) -> Path:
    """Render and write atomically to ``path`` (format from ``fmt`` or the suffix)."""
    out = Path(path)
    content = render(sub, format_for(out, fmt))
    tmp = out.with_name(out.name + ".tmp")
    try:
        if isinstance(content, bytes):
            tmp.write_bytes(content)
        else:
            tmp.write_text(content, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise VizError(f"could not write {out}: {e.strerror or e}") from e
    return out


__all__ = [
    "FORMATS",
    "Format",
    "Subgraph",
    "VizEdge",
    "VizError",
    "VizNode",
    "episode_subgraph",
    "format_for",
    "memory_subgraph",
    "render",
    "task_subgraph",
    "to_dot",
    "to_html",
    "to_mermaid",
    "to_png",
    "write",
]
