"""Keep redis-py's optional OpenTelemetry metrics out of its import.

redis-py 8 imports ``opentelemetry.sdk.metrics`` (~35 ms) when it is installed, only to
offer instrumentation saga never turns on. saga installs the OTel SDK for its own traces,
so every ``saga`` command paid for it. While the ``redis`` package itself is executed,
that module is hidden (redis-py's guarded ``try: import`` then takes its "not installed"
branch); it is visible again right after, for anyone who imports it.

Guarded: only the first import of ``redis`` is wrapped, and only when the SDK module is
not loaded yet; a redis-py that needed the module after all (an ImportError naming it)
is imported again plainly. pyproject bounds redis-py's version; tests/cli/test_startup.py
shows the module stays out and that redis-py still works.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_HIDDEN = "opentelemetry.sdk.metrics"


class _Hiding:
    """Runs the real loader of ``redis`` with the SDK metrics module hidden (a loader by
    protocol: importlib.abc costs more to import than the whole wrapper saves)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._real.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        hide = _HIDDEN not in sys.modules
        if hide:
            sys.modules[_HIDDEN] = None  # type: ignore[assignment]  # import raises ImportError
        before = set(sys.modules)
        try:
            self._real.exec_module(module)
        except ImportError as exc:
            if not hide or _HIDDEN not in str(exc):
                raise
            _unhide()
            for name in set(sys.modules) - before:  # redis's half-imported submodules
                if name.startswith("redis."):
                    del sys.modules[name]
            self._real.exec_module(module)  # plainly, with the SDK
        finally:
            if hide:
                _unhide()


def _unhide() -> None:
    if _HIDDEN in sys.modules and sys.modules[_HIDDEN] is None:
        del sys.modules[_HIDDEN]


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
