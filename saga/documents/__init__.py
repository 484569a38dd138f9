"""The document pipeline's definition (router -> parser -> grouper, the
steps in ``saga.steps``), its publishing, review decisions and the demo."""

from typing import Any


def __getattr__(name: str) -> Any:
    # SAGA_PIPELINE=saga.documents:app named the pipeline before it moved to
    # saga.documents.pipeline: keep that reference working, loaded only when asked
    if name == "app":
        from saga.documents.pipeline import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
