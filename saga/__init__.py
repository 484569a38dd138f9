"""saga: durable sagas on Redis — define a saga type with ``saga.App``, run its steps
with ``saga worker module:app``, start and read sagas with ``app.client()``.

The names below are the public API. They load on first use, so that ``import saga``
(and every ``saga`` command) stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from saga import lean_imports

lean_imports.install()

if TYPE_CHECKING:
    from saga.api.app import App
    from saga.api.app_maps import MapResults
    from saga.api.client import SagaClient
    from saga.api.pipeline import AppError
    from saga.steps.context import StepContext
    from saga.steps.errors import (
        InvalidInputError,
        NotFoundError,
        PermanentError,
        RetryableError,
    )

__version__ = "0.1.0"
__all__ = [
    "App",
    "AppError",
    "InvalidInputError",
    "MapResults",
    "NotFoundError",
    "PermanentError",
    "RetryableError",
    "SagaClient",
    "StepContext",
    "__version__",
]

_HOMES = {
    "App": "saga.api.app",
    "AppError": "saga.api.pipeline",
    "MapResults": "saga.api.app_maps",
    "SagaClient": "saga.api.client",
    "StepContext": "saga.steps.context",
    "InvalidInputError": "saga.steps.errors",
    "NotFoundError": "saga.steps.errors",
    "PermanentError": "saga.steps.errors",
    "RetryableError": "saga.steps.errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'saga' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
