"""The configuration: one frozen ``Settings`` struct read from ``SAGA_*``
variables (``settings.load_settings``) and its per-topic readers."""
