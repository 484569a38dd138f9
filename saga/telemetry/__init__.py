"""Logs, traces and metrics of the runtime.

Importing this package imports nothing heavy: OpenTelemetry is loaded by
``tracing`` only once tracing is configured, and by ``metrics`` in workers.
"""
