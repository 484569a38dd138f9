"""Names a deployment may have set before the move (issue 37) still resolve."""

from __future__ import annotations


def test_the_documents_app_keeps_its_old_reference() -> None:
    """SAGA_PIPELINE=saga.documents:app, as set before the move, names the same App."""
    import saga.documents
    from saga.documents.pipeline import app

    assert saga.documents.app is app
