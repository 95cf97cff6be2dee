"""The skip marker of tests that play the text games: they need the simulators' packages (the
``envs`` extra) and Java 17."""

from __future__ import annotations

import importlib

import pytest

from showcase.envs.jvm import has_java17


def importable(*modules: str) -> bool:
    """Whether every module imports (a broken install counts as missing)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return False
    return True


def requires_java(*modules: str, reason: str) -> pytest.MarkDecorator:
    """Skip unless ``modules`` import and Java 17 is found."""
    return pytest.mark.skipif(not (importable(*modules) and has_java17()), reason=reason)
