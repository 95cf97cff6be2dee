"""The benchmarks' one runner, ``python -m bench``: every benchmark from one command.

::

    python -m bench list               # every benchmark, with what it measures
    python -m bench run NAME [ARGS]    # run one: python -m bench run speed --sizes 1000
    python -m bench run NAME --help    # its options

A benchmark is a module of ``bench/`` with a ``main(argv)``; ``run`` hands it the arguments
that follow its name, exactly as ``python -m bench.NAME ARGS`` would. Results go to
``bench/results/`` unless the benchmark is told ``--out``.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"runner"}
"""Modules of ``bench/`` with a ``main`` that measure nothing."""
USAGE = "usage: python -m bench list | python -m bench run NAME [ARGS...]"


def benchmarks() -> dict[str, str]:
    """Every benchmark module of ``bench/`` (one with a top-level ``main``), by name, with the
    first line of its docstring; read from the source, so listing imports nothing.

    >>> names = benchmarks()
    >>> "speed" in names and "learning" in names and not {"common", "runner"} & set(names)
    True
    """
    found = {}
    for path in sorted(BENCH.glob("*.py")):
        if path.name.startswith("_") or path.stem in NOT_BENCHMARKS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            found[path.stem] = summary(ast.get_docstring(tree) or "")
    return found


def summary(doc: str, width: int = 90) -> str:
    """A docstring's first sentence on one line, without a leading command, at most ``width``
    characters.

    >>> summary("``python -m bench.x``: what one thing costs. More.")
    'what one thing costs.'
    """
    text = " ".join(doc.strip().split("\n\n", 1)[0].split())
    text = re.sub(r"^``python -m [\w.]+``:\s*", "", text)
    text = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def run(name: str, argv: Sequence[str]) -> int:
    """Run benchmark ``name`` with ``argv``; its exit status (0 when its ``main`` returns
    nothing)."""
    known = benchmarks()
    if name not in known:
        print(
            f"unknown benchmark {name!r}; `python -m bench list` names them: {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(f"bench.{name}")
    status = module.main(list(argv))
    return status if isinstance(status, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["list"] and len(args) == 1:
        known = benchmarks()
        width = max(map(len, known))
        for name, doc in known.items():
            print(f"{name:<{width}}  {doc}")
        return 0
    if args[:1] == ["run"] and len(args) >= 2:
        return run(args[1], args[2:])
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    print(USAGE, file=sys.stderr)
    return 2
