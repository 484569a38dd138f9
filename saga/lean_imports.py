"""Keep redis-py's optional OpenTelemetry metrics out of its import.

redis-py 8 imports ``opentelemetry.sdk.metrics`` (~35 ms) and the metrics API
``opentelemetry.metrics`` (~8 ms) when they are installed, only to offer instrumentation
saga never turns on. saga installs the OTel SDK for its own traces, so every ``saga``
command paid for them. While the ``redis`` package itself is executed, those modules are
hidden (redis-py's guarded ``try: import`` then takes its "not installed" branch); they
are visible again right after, for anyone who imports them (the worker's own metrics).

Guarded: only the first import of ``redis`` is wrapped, and only the modules not loaded
yet are hidden; a redis-py that needed one after all (an ImportError naming it) is
imported again plainly. pyproject bounds redis-py's version;
tests/cli/test_lean_imports.py shows the modules stay out and that redis-py still works.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_HIDDEN = ("opentelemetry.sdk.metrics", "opentelemetry.metrics")


class _Hiding:
    """Runs the real loader of ``redis`` with the OTel metrics modules hidden (a loader by
    protocol: importlib.abc costs more to import than the whole wrapper saves)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._real.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        hidden = [name for name in _HIDDEN if name not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError
        before = set(sys.modules)
        try:
            self._real.exec_module(module)
        except ImportError as exc:
            if not any(name in str(exc) for name in hidden):
                raise
            _unhide(hidden)
            for name in set(sys.modules) - before:  # redis's half-imported submodules
                if name.startswith("redis."):
                    del sys.modules[name]
            self._real.exec_module(module)  # plainly, with OTel's metrics
        finally:
            _unhide(hidden)


def _unhide(names: list[str]) -> None:
    for name in names:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


class _RedisFinder:
    """Finds ``redis`` once, through the normal path finder, and wraps its loader."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "redis":
            return None
        uninstall()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Hiding(spec.loader)  # type: ignore[assignment]  # a loader by protocol
        return spec


_FINDER = _RedisFinder()


def install() -> None:
    """Wrap the first import of ``redis`` (a no-op once it is imported)."""
    if "redis" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
