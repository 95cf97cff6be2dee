"""What tells a task's procedures apart, what became of each version, and which episodes used them.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.viz.compare``.

>>> objects("cook block of cheese in stove")
['block of cheese', 'stove']
>>> short_step("cook block of cheese in stove"), short_step("open door to east")
('cook cheese in stove', 'open door E')
>>> aligned(["take knife", "open fridge", "eat"], ["take knife", "open oven", "eat", "sleep"])
[('·', 'same', '·'), ('open oven', 'changed', 'open oven'), ('· + sleep', 'added', '· +1')]
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence

from graphmem.models import AnyMemory, Edge, EdgeKind, Namespace, Procedure
from graphmem.ops.explain import episode_report
from graphmem.stores.base import MemoryStore
from graphmem.viz.graph import CompareRow, Subgraph, VersionLink, shorten

MAX_EPISODES = 6
"""Episodes told on a task page: the most recent that used (else were offered) its procedures."""
MAX_STEPS = 200
"""A chain longer than this is compared on its first steps only."""

_SPLIT = re.compile(r"\b(?:in|into|on|onto|with|to|from|at)\b")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s*(\S.*)$", re.M)
_DIRECTIONS = frozenset({"north", "south", "east", "west", "up", "down", "left", "right"})

EdgesOf = Callable[[str], list[Edge]]


def objects(action: str) -> list[str]:
    """The things an action handles: its words after the verb, split at prepositions, without
    compass directions (``"open door to east"`` → ``["door"]``)."""
    words = action.lower().split()
    if len(words) < 2:
        return []
    parts = (" ".join(p.split()) for p in _SPLIT.split(" ".join(words[1:])))
    return [p for p in parts if p and p not in _DIRECTIONS]


SHORT_OBJECT = 14
"""A step's short label keeps at most this many characters of its object (its last words)."""


def short_step(action: str) -> str:
    """A label for a narrow table cell: the verb, the first object's last words (``"block of
    cheese"`` → ``"cheese"``, ``"orange bell pepper"`` → ``"bell pepper"``), then where to (the
    last object's last word after its preposition, or a compass direction's initial); actions
    of one or two words stay whole."""
    words = action.split()
    found = objects(action)
    if len(words) <= 2 or not found:
        return " ".join(words)
    head = found[0].split(" of ")[-1].split()
    while len(head) > 1 and len(" ".join(head)) > SHORT_OBJECT:
        head = head[1:]
    tail: list[str] = []
    compass = [w for w in words[1:] if w.lower() in _DIRECTIONS]
    where = _SPLIT.findall(action.lower())
    if compass:
        tail = [compass[0][0].upper()]
    elif len(found) > 1 and where:
        tail = [where[-1], found[-1].split()[-1]]
    return " ".join([words[0], *head, *tail])


def _distinct_objects(actions: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(o for a in actions for o in objects(a)))


def distinctive(actions: Sequence[str], best: Sequence[str], limit: int = 0) -> str:
    """One line saying how ``actions`` differ from the best procedure's: the objects only it
    handles (+) and those it lacks (−; at most ``limit`` of each when ``limit`` > 0), else the
    first step where they part, else "same"."""
    if list(actions) == list(best):
        return "same steps as the best"
    mine, theirs = _distinct_objects(actions), _distinct_objects(best)
    extra = [o for o in mine if o not in theirs]
    missing = [o for o in theirs if o not in mine]
    if limit > 0:
        extra, missing = extra[:limit], missing[: max(1, limit - 1)]
    parts = []
    if extra:
        parts.append("+ " + ", ".join(extra))
    if missing:
        parts.append("− " + ", ".join(missing))
    if parts:
        return " · ".join(parts)
    for k, (a, b) in enumerate(zip(actions, best, strict=False)):
        if a != b:
            return f"step {k}: {a}"
    shorter = len(actions) < len(best)
    return f"{'stops' if shorter else 'goes on'} after step {min(len(actions), len(best)) - 1}"


Cell = tuple[str, str, str]
"""One step of a procedure in the comparison table: full text, state, short label."""


def aligned(best: Sequence[str], actions: Sequence[str]) -> list[Cell]:
    """``actions`` laid out on the best procedure's columns: ``(text, state, label)`` per
    column, state ``same`` (label ·), ``changed``, ``missing`` (—) or ``added`` (extra steps,
    written into the column they follow; the label counts them, "+2")."""
    cells: list[Cell] = [("—", "missing", "—") for _ in best]
    inserted: dict[int, list[str]] = {}
    matcher = difflib.SequenceMatcher(None, list(best), list(actions), autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        mine = list(actions[j1:j2])
        if op == "equal":
            cells[i1:i2] = [("·", "same", "·")] * (i2 - i1)
        elif op == "replace":
            for k, i in enumerate(range(i1, min(i2, i1 + len(mine)))):
                cells[i] = (mine[k], "changed", short_step(mine[k]))
            inserted.setdefault(i2 - 1, []).extend(mine[i2 - i1 :])
        elif op == "insert":
            inserted.setdefault(i1 - 1, []).extend(mine)
    extra: list[Cell] = []
    for at, added in sorted(inserted.items()):
        if not added:
            continue
        plus = " ".join(f"+ {a}" for a in added)
        if not cells:
            extra.append((plus, "added", f"+{len(added)}"))
            continue
        col = min(max(at, 0), len(cells) - 1)
        text, state, label = cells[col]
        joined = f"{plus} {text}" if at < 0 else f"{text} {plus}"
        more = f"+{len(added)} {label}" if at < 0 else f"{label} +{len(added)}"
        cells[col] = (joined.strip(), "added" if state == "same" else state, more)
    return cells + extra


def procedure_actions(store: MemoryStore, proc: Procedure, edges_of: EdgesOf) -> list[str]:
    """A procedure's actions: its chain of steps; else its script's numbered lines; else the
    chain of the trajectory it was DISTILLED_FROM (a proceduralized script keeps no steps)."""
    own = chain_actions(store, proc.namespace, proc.id, edges_of)
    if own:
        return own
    lines = [m.group(1).strip() for m in _NUMBERED.finditer(proc.script or "")]
    if lines:
        return lines[:MAX_STEPS]
    for e in edges_of(proc.id):
        if e.kind is EdgeKind.DISTILLED_FROM and e.src == proc.id:
            return chain_actions(store, proc.namespace, e.dst, edges_of)
    return []


def chain_actions(store: MemoryStore, namespace: str, proc_id: str, edges_of: EdgesOf) -> list[str]:
    """A procedure's actions in chain order (FIRST_STEP, NEXT…), up to the first step missing
    from the store. The walk reads edges through ``edges_of`` (the picture's cache); the steps
    are read in one call."""
    ids: list[str] = []
    nxt = [e.dst for e in edges_of(proc_id) if e.kind is EdgeKind.FIRST_STEP and e.src == proc_id]
    while nxt and len(ids) < MAX_STEPS and nxt[0] not in ids:
        ids.append(nxt[0])
        nxt = [e.dst for e in edges_of(nxt[0]) if e.kind is EdgeKind.NEXT and e.src == nxt[0]]
    steps = {m.id: m for m in store.get_many(namespace, ids)} if ids else {}
    out: list[str] = []
    for step_id in ids:
        if step_id not in steps:
            break
        out.append(str(getattr(steps[step_id], "action", "")))
    return out


def best_first(procs: Sequence[Procedure]) -> list[Procedure]:
    """Live before obsolete, then highest Q, most uses, successful, newest."""
    return sorted(
        procs,
        key=lambda p: (p.obsolete, -p.q, -p.uses, not p.success, -p.created_at.timestamp(), p.id),
    )


def describe_procedures(
    sub: Subgraph, store: MemoryStore, procs: Sequence[Procedure], edges_of: EdgesOf
) -> None:
    """Fill ``sub.compare`` / ``sub.columns`` / ``sub.versions`` / ``sub.episodes`` and give
    each procedure's node a caption saying what is its own. Needs two procedures to compare."""
    actions = {p.id: procedure_actions(store, p, edges_of) for p in procs}

    def linked(proc: Procedure) -> bool:
        node = sub.nodes.get(proc.id)
        return node is not None and node.linked

    # The task's own procedures first (the best is one of them), then those linked to them.
    ordered = best_first([p for p in procs if not linked(p)]) + best_first(
        [p for p in procs if linked(p)]
    )
    if len(ordered) >= 2:
        best = ordered[0]
        sub.columns = actions[best.id]
        used_by = _users(procs, edges_of)
        for proc in ordered:
            own = actions[proc.id]
            if proc.id == best.id:
                line = "best · " + ", ".join(_distinct_objects(own)[:4])
                cells = [(a, "best", short_step(a)) for a in own]
            else:
                line = distinctive(own, sub.columns)
                cells = aligned(sub.columns, own)
            row = _row(proc, line, cells, used_by.get(proc.id, []))
            row.linked = linked(proc)
            sub.compare.append(row)
            node = sub.nodes.get(proc.id)
            if node is not None:
                short = line if proc.id == best.id else distinctive(own, sub.columns, limit=3)
                node.caption = _caption(proc, len(own), short) + _twins(node.caption)
        sub.compare = group_rows(sub.compare, {p.id: tuple(actions[p.id]) for p in procs})
        _stack_twins(sub)
    sub.versions = _versions(sub, procs, actions, edges_of)
    _episodes(sub, store, procs, edges_of)


def group_rows(
    rows: Sequence[CompareRow], steps: Mapping[str, tuple[str, ...]] | None = None
) -> list[CompareRow]:
    """One row for procedures with the same steps (``steps``: each procedure's actions), else
    for those whose rows would read the same (outcome, Q, uses, version, granularity, own or
    linked): the first, the most useful (rows come best first), keeps its place and lists the
    others as ``twins``, and the episodes that used any of them."""
    out: list[CompareRow] = []
    seen: dict[tuple[object, ...], CompareRow] = {}
    for row in rows:
        same_steps = (steps or {}).get(row.id, ())
        key: tuple[object, ...] = ("steps", *same_steps) if same_steps else (
            row.granularity, row.version, round(row.q, 2), row.uses,
            row.outcome, row.obsolete, row.distinct, tuple(row.cells), row.linked,
        )  # fmt: skip
        first = seen.get(key)
        if first is None:
            seen[key] = row
            out.append(row)
            continue
        first.twins.append(row.id)
        first.episodes.extend(e for e in row.episodes if e not in first.episodes)
    return out


def _stack_twins(sub: Subgraph) -> None:
    """Procedures that share a row of the comparison stack in the picture too: a twin whose
    steps are not drawn of its own goes under the procedure whose row it shares (field
    ``same steps as``, which :func:`graphmem.viz.layout.layout` stacks by)."""
    own_chain = {e.src for e in sub.edges if e.kind == EdgeKind.FIRST_STEP}
    for row in sub.compare:
        for twin in row.twins:
            node = sub.nodes.get(twin)
            if node is not None and twin not in own_chain and "same steps as" not in node.fields:
                node.fields["same steps as"] = row.id


def name_retrieved(
    sub: Subgraph, store: MemoryStore, procs: Sequence[Procedure], edges_of: EdgesOf
) -> None:
    """An episode's view: the procedures it retrieved are told apart as on a task page, by
    their steps against the best of them (their task texts often read the same), in their
    captions and in the table's memory column."""
    if len(procs) < 2:
        return
    ordered = best_first(procs)
    actions = {p.id: procedure_actions(store, p, edges_of) for p in ordered}
    best = actions[ordered[0].id]
    lines = {ordered[0].id: "best · " + ", ".join(_distinct_objects(best)[:4])}
    for proc in ordered[1:]:
        lines[proc.id] = distinctive(actions[proc.id], best, limit=3)
    for proc in ordered:
        node = sub.nodes.get(proc.id)
        if node is not None:
            node.caption = _caption(proc, len(actions[proc.id]), lines[proc.id])
    for row in sub.table:
        if row.get("id") in lines:
            row["memory"] = f"procedure: {shorten(lines[row['id']], width=80, lines=1)}"


def _row(proc: Procedure, line: str, cells: list[Cell], eps: list[str]) -> CompareRow:
    return CompareRow(
        id=proc.id,
        granularity=proc.granularity.value,
        version=proc.version,
        q=proc.q,
        uses=proc.uses,
        successes=proc.successes,
        outcome=f"{'✓' if proc.success else '✗'} r={proc.reward:g}",
        obsolete=proc.obsolete,
        distinct=line,
        cells=cells,
        episodes=eps,
    )


def _caption(proc: Procedure, steps: int, line: str) -> str:
    """Kind, length (granularity unless the default), what is its own, outcome, uses, Q."""
    head = f"PROCEDURE · {steps} steps"
    if proc.granularity.value != "proceduralized":
        head += f" · {proc.granularity.value}"
    uses = f"{proc.uses} use{'s' if proc.uses != 1 else ''}"
    tail = f"{'✓' if proc.success else '✗'} r={proc.reward:g} · {uses} · Q {proc.q:.2f}"
    if proc.version > 1:
        tail += f" · v{proc.version}"
    caption = f"{head}\n{shorten(line, width=28, lines=2)}\n{tail}"
    return caption + ("\n(obsolete)" if proc.obsolete else "")


def _twins(old: str) -> str:
    """Keep the "+N with the same steps" line that grouping added to the old caption."""
    kept = [line for line in old.split("\n") if line.endswith("with the same steps")]
    return "".join("\n" + line for line in kept)


def _users(procs: Sequence[Procedure], edges_of: EdgesOf) -> dict[str, list[str]]:
    """Per procedure, the episodes that marked it used."""
    out: dict[str, list[str]] = {}
    for proc in procs:
        for e in edges_of(proc.id):
            if e.kind is EdgeKind.RETRIEVED and e.dst == proc.id and e.props.get("used") is True:
                out.setdefault(proc.id, []).append(e.src)
    return out


def _versions(
    sub: Subgraph, procs: Sequence[Procedure], actions: dict[str, list[str]], edges_of: EdgesOf
) -> list[VersionLink]:
    byid = {p.id: p for p in procs}
    links: list[VersionLink] = []
    for proc in procs:
        for e in edges_of(proc.id):
            if e.kind is not EdgeKind.EVOLVED_FROM or e.src != proc.id or e.dst not in byid:
                continue
            old = byid[e.dst]
            before, after = actions[old.id], actions[proc.id]
            change = e.props.get("change")
            links.append(
                VersionLink(
                    old_id=old.id,
                    new_id=proc.id,
                    old_version=old.version,
                    new_version=proc.version,
                    old_q=old.q,
                    new_q=proc.q,
                    change=change if isinstance(change, str) else "",
                    added=list(dict.fromkeys(a for a in after if a not in before)),
                    removed=list(dict.fromkeys(a for a in before if a not in after)),
                )
            )
    links.sort(key=lambda v: (v.new_version, v.new_id))
    return links


def _episodes(
    sub: Subgraph, store: MemoryStore, procs: Sequence[Procedure], edges_of: EdgesOf
) -> None:
    offers: dict[str, bool] = {}
    for proc in procs:
        for e in edges_of(proc.id):
            if e.kind is EdgeKind.RETRIEVED and e.dst == proc.id:
                offers[e.src] = offers.get(e.src, False) or e.props.get("used") is True
    if not offers:
        return
    found: list[AnyMemory] = store.get_many(sub.namespace, list(offers))
    recent = sorted(
        found,
        key=lambda m: (not offers[m.id], -_finished(m), m.id),
    )[:MAX_EPISODES]
    sub.episodes = [episode_report(store, Namespace(sub.namespace), m.id) for m in recent]
    if sub.columns:
        _name_other_procedures(sub, store, {p.id for p in procs}, edges_of)


def _name_other_procedures(
    sub: Subgraph, store: MemoryStore, shown: set[str], edges_of: EdgesOf
) -> None:
    """An offered procedure that is not in the table (another task's, or obsolete) is named,
    too, by how its steps differ from the best's, instead of its task text that reads like
    every other's."""
    others = {o.id for ep in sub.episodes for o in ep.offered if o.kind == "Procedure"} - shown
    lines = {
        m.id: distinctive(procedure_actions(store, m, edges_of), sub.columns, limit=3)
        for m in store.get_many(sub.namespace, sorted(others))
        if isinstance(m, Procedure)
    }
    for ep in sub.episodes:
        ep.offered = [
            o.model_copy(update={"summary": f"procedure, not in the table: {lines[o.id]}"})
            if o.id in lines
            else o
            for o in ep.offered
        ]


def _finished(memory: AnyMemory) -> float:
    when = getattr(memory, "finished_at", None) or memory.created_at
    return float(when.timestamp())


__all__ = [
    "MAX_EPISODES",
    "Cell",
    "aligned",
    "best_first",
    "chain_actions",
    "describe_procedures",
    "distinctive",
    "group_rows",
    "name_retrieved",
    "objects",
    "procedure_actions",
    "short_step",
]
