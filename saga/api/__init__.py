"""The public API: ``saga.App`` and its pieces, ``SagaClient``, retries,
schedules and undo steps (``saga/__init__.py`` exports the names people use)."""
