"""The outside world: document sources, billing keys, LLM calls, the embedded server, telemetry."""
