"""The business steps: router, parser, grouper.

Pure-ish async functions ``(ctx, input) -> output`` on msgspec Structs. They
know nothing of Redis, streams or retries; what they need from the outside
world arrives through the Protocols in ``saga.steps.context``.
"""
