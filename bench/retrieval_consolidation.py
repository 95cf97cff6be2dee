"""LongMemEval-S retrieval with consolidation on and off (issue 45.2).

    python -m bench.retrieval_consolidation              # MiniLM, all sessions and questions
    python -m bench.retrieval_consolidation --embedder hashing --max-questions 4   # smoke

The data, questions and metrics are :mod:`bench.retrieval_quality`'s (recall@1/5/10 and
NDCG@10 of the supporting sessions). Each session is stored as one Note and each turn as one
Note, once with ``MemoryConfig.consolidation`` off (the default) and once on, through
``add_note``, whose write hook then merges notes of one subject and content and lets a note
that contradicts an older live note of its subject supersede it
(:mod:`graphmem.ops.consolidation`). A merged version stands for the sessions of every note
it merged; a superseded note is not recalled (its session is found only through other
notes). Sessions are ranked by their best note (λ = 0: with every Q at its neutral start,
two-phase ranks the same). The target (issue 45): NDCG@10 with consolidation on >= off.
Texts are embedded once and the vectors reused by both corpora.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.retrieval_quality import (
    TURN_POOL,
    Question,
    Session,
    by_best,
    data_dir,
    load,
    make_embedder,
    score,
    subset,
)

GRANULARITIES = ("sessions", "turns")


class CachedEmbedder:
    """An embedder that embeds each text once (both corpora read the same texts)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def prefill(self, texts: Sequence[str], batch: int = 64) -> None:
        """Embed ``texts`` in batches up front (one text at a time costs far more)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for start in range(0, len(todo), batch):
            self.embed(todo[start : start + batch])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for text, row in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[text] = row
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)


class ConsolidatedCorpus:
    """The sessions as notes under one consolidation setting, and which sessions each live
    note stands for."""

    def __init__(self, sessions: Sequence[Session], embedder: Any, settings: dict[str, Any]):
        from graphmem import GraphMemory
        from graphmem.config import ConsolidationConfig, MemoryConfig
        from graphmem.stores.embedded import EmbeddedStore

        config = MemoryConfig(consolidation=ConsolidationConfig(**settings))
        self.mem = GraphMemory(EmbeddedStore.in_memory(), embedder=embedder, config=config)
        self.written: dict[str, set[str]] = {}  # note id -> sessions whose text wrote it
        items = [("sessions", s.id, s.text) for s in sessions]
        items += [("turns", s.id, t) for s in sessions for t in s.turns]
        started = time.perf_counter()
        for granularity, session_id, text in items:
            note = self.mem.add_note(granularity, text, source_ref=session_id)
            self.written.setdefault(note.id, set()).add(session_id)
            for origin in self._origins(granularity, note.id):
                self.written.setdefault(origin, set()).add(session_id)
        self.seconds = time.perf_counter() - started
        self.session_of: dict[str, set[str]] = {}
        self.figures: dict[str, dict[str, int]] = {}
        for granularity in GRANULARITIES:
            self.figures[granularity] = self._resolve(granularity)

    def _origins(self, namespace: str, note_id: str) -> list[str]:
        """The notes a merged version merged (its EVOLVED_FROM by a merge, transitively)."""
        out: list[str] = []
        todo = [note_id]
        while todo:
            current = todo.pop()
            for edge in self.mem.store.edges(namespace, current, kinds=[_evolved()]):
                if str(edge.props.get("change", "")).startswith("consolidated"):
                    out.append(edge.dst)
                    todo.append(edge.dst)
        return out

    def _resolve(self, namespace: str) -> dict[str, int]:
        """Each live note's sessions: its own and those of every note it merged."""
        store = self.mem.store
        notes = list(store.iter_nodes(namespace))
        live = [n for n in notes if not n.obsolete]
        for note in live:
            sessions = set(self.written.get(note.id, set()))
            for origin in self._origins(namespace, note.id):
                sessions |= self.written.get(origin, set())
            self.session_of[note.id] = sessions
        superseded = [
            e
            for e in store.iter_edges(namespace)
            if e.kind.value == "SUPERSEDES" and e.props.get("source") == "consolidate"
        ]
        return {
            "stored": len(notes),
            "live": len(live),
            "merged": sum(1 for e in superseded if "reason" not in e.props),
            "contradicted": sum(1 for e in superseded if "reason" in e.props),
        }

    def rank(self, granularity: str, question: str) -> list[str]:
        pool = self.figures[granularity]["live"]
        if granularity == "turns":
            pool = min(pool, TURN_POOL)
        found = self.mem.retrieve(granularity, question, kinds=("Note",), k1=pool, k2=pool, lam=0.0)
        ordered = [s for h in found.hits for s in sorted(self.session_of.get(h.memory.id, ()))]
        return by_best(ordered)


def _evolved() -> Any:
    from graphmem.models import EdgeKind

    return EdgeKind.EVOLVED_FROM


def note_key_text(text: str) -> str:
    """The text ``add_note`` embeds for ``text`` (its content and the fields the offline
    extraction gives it)."""
    from graphmem.llm import ops
    from graphmem.models import Note

    fields = ops.note_fields(None, text).value
    note = Note(
        namespace="x",
        content=text,
        keywords=fields.keywords,
        tags=fields.tags,
        context=fields.context,
        category=fields.category,
    )
    return note.embed_text()


VARIANTS: dict[str, dict[str, Any]] = {
    "off": {},
    "on": {"enabled": True},
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    path = data_dir()
    sessions, questions = subset(*load(path), args.max_questions, args.seed)
    embedder = CachedEmbedder(make_embedder(args.embedder))
    texts = [s.text for s in sessions] + [t for s in sessions for t in s.turns]
    embedder.prefill([note_key_text(t) for t in dict.fromkeys(texts)] + [q.text for q in questions])
    result: dict[str, Any] = {
        "machine": common.machine_info(),
        "data": {
            "sessions": len(sessions),
            "turns": sum(len(s.turns) for s in sessions),
            "questions": len(questions),
        },
        "embedder": getattr(embedder, "name", ""),
        "rows": [],
        "per_question": {},
    }
    for variant in args.variants.split(","):
        corpus = ConsolidatedCorpus(sessions, embedder, VARIANTS[variant])
        for granularity in GRANULARITIES:
            rankings = {q.id: corpus.rank(granularity, q.text) for q in questions}
            row = {
                "consolidation": variant,
                "notes": granularity,
                **corpus.figures[granularity],
                **score(rankings, questions),
                "write_s": round(corpus.seconds, 1),
            }
            result["rows"].append(row)
            result["per_question"][f"{variant}/{granularity}"] = per_question(rankings, questions)
    result["runtime_s"] = round(time.perf_counter() - started, 1)
    return result


def per_question(rankings: dict[str, list[str]], questions: Sequence[Question]) -> dict[str, float]:
    from bench.retrieval_quality import ndcg_at

    return {q.id: ndcg_at(rankings[q.id], q.supporting) for q in questions}


def markdown(result: dict[str, Any], command: str) -> str:
    rows = [
        [
            r["notes"],
            r["consolidation"],
            str(r["stored"]),
            str(r["live"]),
            str(r["merged"]),
            str(r["contradicted"]),
            f"{r['recall@1']:.3f}",
            f"{r['recall@5']:.3f}",
            f"{r['recall@10']:.3f}",
            f"{r['ndcg@10']:.3f}",
        ]
        for r in result["rows"]
    ]
    data = result["data"]
    return "\n".join(
        [
            "# LongMemEval-S retrieval with consolidation on and off",
            "",
            common.machine_markdown(result["machine"]),
            f"- data: {data['sessions']} sessions ({data['turns']} turns), "
            f"{data['questions']} questions; embedder {result['embedder']}",
            f"- run time {result['runtime_s']} s; command: `{command}`",
            "",
            common.markdown_table(
                [
                    "notes",
                    "consolidation",
                    "notes stored",
                    "live notes",
                    "merged away",
                    "contradicted",
                    "recall@1",
                    "recall@5",
                    "recall@10",
                    "NDCG@10",
                ],
                rows,
            ),
            "",
            "Sessions ranked by their best live note, λ = 0 (key = query). `merged away`: notes "
            "that became part of a merged version (same subject and content); `contradicted`: "
            "notes a newer note of their subject superseded (the rule of "
            "graphmem.ops.consolidation).",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval_consolidation")
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--max-questions", type=int, help="a subset (smoke runs)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    parser.add_argument("--prefix", default="consolidation_longmemeval")
    args = parser.parse_args(argv)
    command = "python -m bench.retrieval_consolidation " + " ".join(sys.argv[1:])
    result = run(args)
    text = markdown(result, command)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.prefix}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{args.prefix}.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
