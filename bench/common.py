"""Helpers shared by the benchmarks: machine facts, timing, memory sampling, result files.

Every benchmark writes ``<name>.json`` (everything measured, plus the machine) and ``<name>.md``
(the tables a person reads) into ``bench/results/`` unless told otherwise, and draws its plots
there as PNG. Nothing here is part of the graphmem package.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DIM = 384

_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


# ---- the machine ----------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def blas_info() -> list[dict[str, Any]]:
    """The BLAS/OpenMP libraries numpy loaded, with the kernel they chose (threadpoolctl)."""
    try:
        import numpy  # noqa: F401  (loads the BLAS so threadpoolctl can see it)
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("internal_api", "version", "architecture", "num_threads", "threading_layer")
    return [{k: lib.get(k) for k in keep} for lib in threadpool_info()]


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def machine_info() -> dict[str, Any]:
    """Where and when the numbers were taken: cores, RAM, CPU, load, BLAS kernel, versions."""
    import numpy

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count() or 0
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {
        "taken_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "ram_gib": ram_gib(),
        "load_avg_1_5_15": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "blas": blas_info(),
        "blas_env": {k: os.environ[k] for k in _BLAS_ENV if k in os.environ},
        "git_commit": git_commit(),
    }


def _library(lib: dict[str, Any]) -> str:
    parts = [str(lib.get("internal_api"))]
    if lib.get("version"):
        parts.append(str(lib["version"]))
    if lib.get("architecture"):
        parts.append(f"kernel {lib['architecture']}")
    return " ".join(parts) + f" × {lib.get('num_threads')} threads"


def machine_markdown(info: dict[str, Any]) -> str:
    blas = ", ".join(_library(b) for b in info.get("blas", []))
    env = ", ".join(f"{k}={v}" for k, v in info.get("blas_env", {}).items()) or "none set"
    load = info.get("load_avg_1_5_15", [])
    return "\n".join(
        [
            f"- taken {info['taken_at']} on {info['cpu_model']}, {info['cores']} cores "
            f"({info['cores_usable']} usable), {info['ram_gib']} GiB RAM",
            f"- load average at start (1/5/15 min): {' / '.join(str(x) for x in load)}",
            f"- Python {info['python']}, numpy {info['numpy']}; BLAS: {blas or 'unknown'}; "
            f"BLAS environment: {env}",
            f"- graphmem commit {info.get('git_commit') or 'unknown'} (plus the working tree)",
        ]
    )


# ---- timing ---------------------------------------------------------------------------------


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / mean (nearest-rank on the sorted samples) and the sample count."""
    if not samples_ms:
        return {"samples": 0, "p50_ms": math.nan, "p95_ms": math.nan, "mean_ms": math.nan}
    ordered = sorted(samples_ms)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]

    return {
        "samples": len(ordered),
        "p50_ms": round(pct(50), 3),
        "p95_ms": round(pct(95), 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


@dataclass
class Case:
    """One thing to time per query: ``fn(i)`` answers query ``i``."""

    name: str
    fn: Callable[[int], object]
    max_queries: int
    budget_s: float = math.inf
    samples_ms: list[float] = field(default_factory=list)
    spent_s: float = 0.0

    def done(self) -> bool:
        return len(self.samples_ms) >= self.max_queries or (
            self.spent_s >= self.budget_s and len(self.samples_ms) >= min(10, self.max_queries)
        )


def time_round_robin(
    cases: Sequence[Case], n_queries: int, *, warmup: int = 3, progress: Any = None
) -> None:
    """Time every case on queries 0..n-1, interleaved query by query.

    Interleaving spreads a busy machine's ups and downs over all cases alike, so their ratios
    stay fair even when the absolute numbers drift. A case stops at its own query cap or time
    budget (slow baselines at large N).
    """
    for case in cases:
        for i in range(min(warmup, n_queries)):
            case.fn(i)
    for i in range(n_queries):
        active = [c for c in cases if not c.done()]
        if not active:
            break
        for case in active:
            t0 = time.perf_counter()
            case.fn(i)
            elapsed = time.perf_counter() - t0
            case.samples_ms.append(elapsed * 1000)
            case.spent_s += elapsed
        if progress is not None:
            progress.update(1)


# ---- memory ---------------------------------------------------------------------------------


def rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:  # pragma: no cover - psutil comes with the bench extras' deps
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class PeakRSS:
    """Samples this process's RSS in a thread; ``peak_mib`` is the rise over the start.

    Cheaper than tracemalloc (which slows Python allocation several-fold and would distort the
    throughput measured at the same time) and it sees native allocations too.
    """

    def __init__(self, interval_s: float = 0.01) -> None:
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.start_bytes = 0
        self.peak_bytes = 0

    def __enter__(self) -> PeakRSS:
        gc.collect()
        self.start_bytes = self.peak_bytes = rss_bytes()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak_bytes = max(self.peak_bytes, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak_bytes = max(self.peak_bytes, rss_bytes())

    @property
    def peak_mib(self) -> float:
        return round((self.peak_bytes - self.start_bytes) / 2**20, 1)


# ---- Neo4j ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Neo4jSettings:
    uri: str
    user: str
    password: str | None
    database: str | None


def neo4j_settings() -> Neo4jSettings | None:
    """The Neo4j to benchmark, from GRAPHMEM_NEO4J_URI (/_USER/_PASSWORD/_DATABASE), or None."""
    uri = os.environ.get("GRAPHMEM_NEO4J_URI")
    if not uri:
        return None
    return Neo4jSettings(
        uri=uri,
        user=os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
        password=os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None,
        database=os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None,
    )


# ---- embedder -------------------------------------------------------------------------------

_MINILM: Any = None


def minilm() -> Any:
    """The offline all-MiniLM-L6-v2 embedder, loaded and warmed once per process."""
    global _MINILM
    if _MINILM is None:
        from graphmem.embedding import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
        embedder.embed(["warm up the model", "and its tokenizer"])
        _MINILM = embedder
    return _MINILM


# ---- output ---------------------------------------------------------------------------------


def progress_bar(total: int, desc: str, *, enabled: bool = True) -> Any:
    """A tqdm bar on stderr (a no-op object when disabled)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", leave=False, disable=not enabled, file=sys.stderr)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            if math.isnan(v):
                return "–"
            return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(out_dir: Path, name: str, data: dict[str, Any], markdown: str) -> list[Path]:
    """Write ``name.json`` and ``name.md`` into ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{name}.json"
    md_path = out_dir / f"{name}.md"
    body = json.dumps(_clean(data), indent=2, ensure_ascii=False, default=_json_default)
    json_path.write_text(body + "\n", encoding="utf-8")
    md_path.write_text(markdown.rstrip() + "\n", encoding="utf-8")
    return [json_path, md_path]


def _clean(value: Any) -> Any:
    """NaN and infinities become null, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _json_default(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):
        return _clean(value.tolist())
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


@contextmanager
def matplotlib_figure(path: Path, *, width: float = 10.0, height: float = 4.5) -> Iterator[Any]:
    """A headless matplotlib figure saved to ``path`` as PNG on exit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width, height))
    try:
        yield fig
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


class FlatCosine:
    """The ``flat-topk`` baseline's memory: texts' vectors in a flat list, searched by cosine,
    no Q, no graph (what a LangGraph store search or LangMem gives)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.vectors: list[Any] = []

    def _unit(self, text: str) -> Any:
        import numpy as np

        v = np.asarray(self.embedder.embed([text])[0], dtype=np.float64)
        return v / (np.linalg.norm(v) or 1.0)

    def add(self, text: str) -> None:
        self.vectors.append(self._unit(text))

    def top(self, text: str, k: int) -> list[int]:
        """Indices of the k texts nearest ``text``, best first; ties: the one added first."""
        import numpy as np

        if not self.vectors:
            return []
        sims = np.stack(self.vectors) @ self._unit(text)
        return [int(i) for i in np.argsort(-sims, kind="stable")[:k]]


def make_embedder(name: str) -> Any:
    if name == "hashing":
        from graphmem.embedding import HashingEmbedder

        return HashingEmbedder()
    return minilm()


def embedder_label(name: str) -> str:
    return "HashingEmbedder (384-d)" if name == "hashing" else "all-MiniLM-L6-v2 (384-d)"


def time_interleaved(
    cases: dict[str, Callable[[int], object]], queries: int, warmup: int
) -> dict[str, Any]:
    """Time each case once per query, the order alternating per query, after ``warmup``
    untimed rounds; p50/p95/mean per case (:func:`percentiles`)."""
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(warmup):
        for name in names:
            cases[name](i)
    for i in range(warmup, warmup + queries):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            t0 = time.perf_counter()
            cases[name](i)
            samples[name].append((time.perf_counter() - t0) * 1000)
    return {name: percentiles(samples[name]) for name in names}
