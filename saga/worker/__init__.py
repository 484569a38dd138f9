"""The step executor: ``saga worker <step>...`` (reader, pool, recovery, promoter, health)."""
