"""Facts that change over time: does the newer note rank above the one it updates?

    python -m bench.updates                 # MiniLM, generated set (seed 0) and LongMemEval-S
    python -m bench.updates --seeds 0,1 --embedder hashing

Generated set (seeded): a user's chat history of ``--days`` days, one note a turn with the
turn's date as ``valid_at``; ``--people`` people each have two to three versions of one fact
(where they live, their job, their car, their phone number, ...), said on different days in
different words ("Ana lives in Porto" ... "Ana moved to Lisbon last month"), among small talk
and the other people's facts. A question asks for the current value ("Where does Ana live
now?"); it counts as right when the newest version ranks above every older version in the
ranking (versions not retrieved at all rank last). LongMemEval-S: its knowledge-update questions
(two evidence sessions each, the later one holding the updated fact), sessions as notes with
their dates: right when the later session ranks above the earlier. Each configuration is
scored on the same notes: vector only, hybrid RRF 1 : 1 and the default (hybrid, adaptive
fusion). Nothing here supersedes by time yet (issue 53 item 3): this is the baseline.
"""

from __future__ import annotations

import argparse
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import common
from bench.protocol import UPDATES_SPLITS

NAMES = [
    "Ana",
    "Bruno",
    "Carla",
    "Diego",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Luca",
    "Maya",
    "Nils",
    "Olga",
    "Pavel",
]
FACTS: list[tuple[str, list[str], list[str]]] = [
    (
        "Where does {p} live now?",
        ["Porto", "Lisbon", "Berlin", "Oslo", "Prague", "Vienna", "Dublin", "Madrid"],
        ["{p} lives in {v}.", "{p} moved to {v} last month.", "{p} just settled down in {v}."],
    ),
    (
        "What is {p}'s job now?",
        ["nurse", "architect", "baker", "pilot", "lawyer", "teacher", "chemist", "plumber"],
        ["{p} works as a {v}.", "{p} started a new job as a {v}.", "{p} is a {v} these days."],
    ),
    (
        "What car does {p} drive now?",
        ["Volvo", "Toyota", "Fiat", "Tesla", "Skoda", "Renault", "Honda", "Mazda"],
        ["{p} drives a {v}.", "{p} bought a {v} and sold the old car.", "{p} got a new {v}."],
    ),
    (
        "What is {p}'s phone number now?",
        ["555-0142", "555-0199", "555-0173", "555-0128", "555-0156", "555-0111", "555-0187"],
        [
            "{p}'s number is {v}.",
            "{p} changed phone numbers, the new one is {v}.",
            "You can reach {p} at {v} now.",
        ],
    ),
]
FIRST_PERSON: list[tuple[str, list[str]]] = [
    (
        "Where do I live now?",
        ["I live in {v}.", "I moved to {v} last month.", "We just settled down in {v}."],
    ),
    (
        "What is my job now?",
        ["I work as a {v}.", "I started a new job as a {v}.", "I am a {v} these days."],
    ),
    (
        "What car do I drive now?",
        ["I drive a {v}.", "I bought a {v} and sold my old car.", "My new car is a {v}."],
    ),
    (
        "What is my phone number now?",
        [
            "My number is {v}.",
            "I changed phone numbers, the new one is {v}.",
            "You can reach me at {v} now.",
        ],
    ),
]
"""The user's own facts, in the first person (questions and templates, in FACTS' order)."""
SMALL_TALK = [
    "The weather was lovely for a walk today.",
    "I tried a new pasta recipe with lemon and garlic.",
    "We watched a documentary about whales last night.",
    "My plants finally got some sun on the balcony.",
    "The train was late again this morning.",
    "I am reading a long novel about a lighthouse keeper.",
    "We played board games until midnight.",
    "The coffee at the corner shop got more expensive.",
]


def generate(
    seed: int, people: int, days: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Notes ``{id, content, valid_at}`` and questions ``{question, versions: [ids, old->new]}``.

    The user's own facts in the first person (every kind of fact, each said two or three times
    as it changes) and ``people`` friends' facts by name (two kinds each), among small talk.
    """
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, 9, tzinfo=UTC)
    notes: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []

    def versions(key: str, question: str, values: list[str], templates: list[str]) -> None:
        n = rng.choice((2, 3))
        days_said = sorted(rng.sample(range(days), n))
        ids = []
        for i, (day, value) in enumerate(zip(days_said, rng.sample(values, n), strict=True)):
            nid = f"{key}-{i}"
            when = start + timedelta(days=day, hours=rng.randint(0, 10))
            notes.append(
                {
                    "id": nid,
                    "content": rng.choice(templates[i:] or templates).format(v=value),
                    "valid_at": when,
                }
            )
            ids.append(nid)
        questions.append({"question": question, "versions": ids})

    for f, (_, values, _) in enumerate(FACTS):
        question, templates = FIRST_PERSON[f]
        versions(f"me-{f}", question, values, templates)
    for p in rng.sample(NAMES, min(people, len(NAMES))):
        for f in rng.sample(range(len(FACTS)), 2):
            question, values, templates = FACTS[f]
            named = [t.replace("{p}", p) for t in templates]
            versions(f"{p}-{f}", question.format(p=p), values, named)
    for day in range(days):
        for text in rng.sample(SMALL_TALK, 2):
            notes.append(
                {
                    "id": f"talk-{day}-{len(notes)}",
                    "content": f"{text} (day {day})",
                    "valid_at": start + timedelta(days=day, hours=rng.randint(1, 10)),
                }
            )
    notes.sort(key=lambda x: x["valid_at"])
    return notes, questions


def newest_first(ranking: list[str], versions: list[str]) -> bool:
    """The newest version ranks above every older one (absent ones rank last)."""
    pos = {
        v: ranking.index(v) if v in ranking else len(ranking) + i for i, v in enumerate(versions)
    }
    return all(pos[versions[-1]] < pos[v] for v in versions[:-1])


SYSTEMS: dict[str, tuple[bool, dict[str, Any]]] = {
    "vector only, updates off": (False, {"hybrid": False}),
    "hybrid RRF 1 : 1, updates off": (False, {"fusion": "rrf"}),
    "hybrid adaptive, updates off": (False, {}),
    "vector only + updates": (True, {"hybrid": False}),
    "default (hybrid adaptive + updates)": (True, {}),
}
"""name: (``fact_updates.enabled``, retrieve overrides). The last row is what a user gets."""


def _memory(embedder: Any, updates: bool) -> Any:
    from graphmem import GraphMemory
    from graphmem.config import FactUpdatesConfig, MemoryConfig
    from graphmem.stores.embedded import EmbeddedStore

    config = MemoryConfig(fact_updates=FactUpdatesConfig(enabled=updates))
    return GraphMemory(EmbeddedStore.in_memory(), embedder=embedder, config=config)


def score_generated(embedder: Any, seeds: list[int], people: int, days: int) -> dict[str, Any]:
    right = {name: 0 for name in SYSTEMS}
    first = {name: 0 for name in SYSTEMS}
    total = firsts = 0
    for seed in seeds:
        notes, questions = generate(seed, people, days)
        given = [{"content": n["content"], "valid_at": n["valid_at"]} for n in notes]
        mems = {on: _memory(embedder, on) for on in (False, True)}
        ids = {
            on: {n["id"]: s.id for n, s in zip(notes, m.add_notes("u", given), strict=True)}
            for on, m in mems.items()
        }
        for q in questions:
            total += 1
            mine = q["versions"][0].startswith("me-")
            firsts += mine
            for name, (on, over) in SYSTEMS.items():
                versions = [ids[on][v] for v in q["versions"]]
                hits = (
                    mems[on]
                    .retrieve("u", q["question"], kinds=("Note",), k1=10, k2=10, lam=0.0, **over)
                    .hits
                )
                ok = newest_first([h.memory.id for h in hits], versions)
                right[name] += ok
                first[name] += ok and mine
    return {"questions": total, "right": right, "first_person": firsts, "right_first": first}


def _stamps(path: Path) -> dict[str, datetime]:
    import json

    out = {}
    for line in (path / "sessions.jsonl").read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        out[raw["id"]] = datetime.strptime(raw["timestamp"][:10], "%Y/%m/%d").replace(tzinfo=UTC)
    return out


def score_longmemeval(embedder: Any, *, turns: bool) -> dict[str, Any]:
    """Sessions (or turns, a session ranked by its best turn) as notes with their dates."""
    from bench import retrieval_quality as rq

    path = rq.data_dir()
    stamps = _stamps(path)
    sessions, questions = rq.load(path)
    asked = [q for q in questions if q.category == "knowledge_update"]
    items = (
        [(s.id, t) for s in sessions for t in s.turns]
        if turns
        else [(s.id, s.text) for s in sessions]
    )
    given = [{"content": text, "valid_at": stamps[sid]} for sid, text in items]
    right = {name: 0 for name in SYSTEMS}
    for on in (False, True):
        mem = _memory(embedder, on)
        stored = mem.add_notes("lme", given)
        session_of = {n.id: sid for n, (sid, _) in zip(stored, items, strict=True)}
        for q in asked:
            versions = sorted(q.supporting, key=lambda s: stamps[s])
            for name, (flag, over) in SYSTEMS.items():
                if flag != on:
                    continue
                k = min(len(items), 200)
                hits = mem.retrieve("lme", q.text, kinds=("Note",), k1=k, k2=k, lam=0.0, **over)
                ranking = list(dict.fromkeys(session_of[h.memory.id] for h in hits.hits))
                right[name] += newest_first(ranking, versions)
    return {"questions": len(asked), "right": right}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--split", choices=sorted(UPDATES_SPLITS), default="dev")
    parser.add_argument("--seeds", default=None, help="generator seeds (default: the split's)")
    parser.add_argument("--people", type=int, default=8)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--no-longmemeval", dest="longmemeval", action="store_false")
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    parser.add_argument("--name", default="updates")
    args = parser.parse_args(argv)
    from bench.retrieval_quality import make_embedder

    embedder = make_embedder(args.embedder)
    seeds = (
        UPDATES_SPLITS[args.split]
        if args.seeds is None
        else tuple(int(x) for x in args.seeds.split(","))
    )
    gen = score_generated(embedder, list(seeds), args.people, args.days)
    named = gen["questions"] - gen["first_person"]
    columns: list[tuple[str, int, dict[str, int]]] = [
        ("generated, all", gen["questions"], gen["right"]),
        ("first person", gen["first_person"], gen["right_first"]),
        ("by name", named, {k: gen["right"][k] - gen["right_first"][k] for k in SYSTEMS}),
    ]
    sets: dict[str, Any] = {"generated": gen}
    if args.longmemeval:
        for label, turns in (("LME-S KU, sessions", False), ("LME-S KU, turns", True)):
            found = score_longmemeval(embedder, turns=turns)
            sets[label] = found
            columns.append((label, found["questions"], found["right"]))
    rows = [
        [name, *[f"{right[name]}/{n} ({right[name] / max(1, n):.0%})" for _, n, right in columns]]
        for name in SYSTEMS
    ]
    table = common.markdown_table(["system", *[c for c, _, _ in columns]], rows)
    md = (
        "# Newer facts above the ones they update\n\n"
        f"Command: `python -m bench.updates --embedder {args.embedder} --split {args.split} "
        f"--people {args.people} --days {args.days}` (generator seeds {list(seeds)}). A "
        "question is right when the newest version of its fact ranks above every older one "
        "(absent versions rank last; λ = 0, k1 = k2 = 10 on the generated set; on "
        "LongMemEval-S the later evidence session above the earlier, sessions or turns as "
        "notes with their session's date).\n\n"
        f"{table}\n\n{common.machine_markdown(common.machine_info())}\n"
    )
    for path in common.write_results(
        args.out, args.name, {"sets": sets, "args": vars(args) | {"out": str(args.out)}}, md
    ):
        print(path, file=sys.stderr)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
