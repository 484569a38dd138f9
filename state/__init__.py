"""The Redis state machine: key schema, Lua transitions and their Python face.

Nothing outside this package writes saga keys. It knows nothing of steps, the
CLI or LLMs: step names arrive as plain strings from the caller.
"""
