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
    """Notes ``{id, content, valid_at}`` and questions ``{question, versions: [ids, old->new]}``."""
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, 9, tzinfo=UTC)
    notes: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for p in rng.sample(NAMES, min(people, len(NAMES))):
        question, values, templates = rng.choice(FACTS)
        n = rng.choice((2, 3))
        days_said = sorted(rng.sample(range(days), n))
        chosen = rng.sample(values, n)
        ids = []
        for i, (day, value) in enumerate(zip(days_said, chosen, strict=True)):
            text = templates[i % len(templates)].format(p=p, v=value)
            nid = f"{p}-{i}"
            notes.append({"id": nid, "content": text, "valid_at": start + timedelta(days=day)})
            ids.append(nid)
        questions.append({"question": question.format(p=p), "versions": ids})
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


CONFIGS: dict[str, dict[str, Any]] = {
    "vector only": {"hybrid": False},
    "hybrid RRF 1 : 1": {"fusion": "rrf"},
    "default (hybrid, adaptive fusion)": {},
}


def score_generated(embedder: Any, seeds: list[int], people: int, days: int) -> dict[str, Any]:
    from graphmem import GraphMemory
    from graphmem.stores.embedded import EmbeddedStore

    right = {name: 0 for name in CONFIGS}
    total = 0
    for seed in seeds:
        notes, questions = generate(seed, people, days)
        mem = GraphMemory(EmbeddedStore.in_memory(), embedder=embedder)
        ns = f"updates-{seed}"
        stored = mem.add_notes(
            ns, [{"content": n["content"], "valid_at": n["valid_at"]} for n in notes]
        )
        id_of = {n["id"]: s.id for n, s in zip(notes, stored, strict=True)}
        for q in questions:
            versions = [id_of[v] for v in q["versions"]]
            total += 1
            for name, over in CONFIGS.items():
                hits = mem.retrieve(
                    ns, q["question"], kinds=("Note",), k1=10, k2=10, lam=0.0, **over
                ).hits
                right[name] += newest_first([h.memory.id for h in hits], versions)
    return {"questions": total, "right": right}


def score_longmemeval(embedder: Any) -> dict[str, Any]:
    from bench import retrieval_quality as rq
    from graphmem import GraphMemory
    from graphmem.stores.embedded import EmbeddedStore

    path = rq.data_dir()
    import json

    stamps = {}
    for line in (path / "sessions.jsonl").read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        stamps[raw["id"]] = datetime.strptime(raw["timestamp"][:10], "%Y/%m/%d").replace(tzinfo=UTC)
    sessions, questions = rq.load(path)
    asked = [q for q in questions if q.category == "knowledge_update"]
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=embedder)
    stored = mem.add_notes(
        "lme", [{"content": s.text, "valid_at": stamps[s.id], "source_ref": s.id} for s in sessions]
    )
    session_of = {n.id: s.id for n, s in zip(stored, sessions, strict=True)}
    right = {name: 0 for name in CONFIGS}
    for q in asked:
        versions = sorted(q.supporting, key=lambda s: stamps[s])
        for name, over in CONFIGS.items():
            k = len(sessions)
            hits = mem.retrieve("lme", q.text, kinds=("Note",), k1=k, k2=k, lam=0.0, **over).hits
            right[name] += newest_first([session_of[h.memory.id] for h in hits], versions)
    return {"questions": len(asked), "right": right}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--people", type=int, default=16)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--no-longmemeval", dest="longmemeval", action="store_false")
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    parser.add_argument("--name", default="updates")
    args = parser.parse_args(argv)
    from bench.retrieval_quality import make_embedder

    embedder = make_embedder(args.embedder)
    seeds = [int(s) for s in args.seeds.split(",")]
    sets = {"generated": score_generated(embedder, seeds, args.people, args.days)}
    if args.longmemeval:
        sets["LongMemEval-S knowledge-update"] = score_longmemeval(embedder)
    rows = [
        [
            name,
            s["questions"],
            *[f"{s['right'][c]} ({s['right'][c] / s['questions']:.0%})" for c in CONFIGS],
        ]
        for name, s in sets.items()
    ]
    table = common.markdown_table(["set", "questions", *CONFIGS], rows)
    md = (
        "# Newer facts above the ones they update\n\n"
        f"Command: `python -m bench.updates --embedder {args.embedder} --seeds {args.seeds} "
        f"--people {args.people} --days {args.days}`. A question is right when the newest "
        "version of its fact ranks above every older one (λ = 0, k1 = k2 = 10 on the generated "
        "set, every session on LongMemEval-S).\n\n"
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
