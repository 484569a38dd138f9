"""``saga worker`` as a newer release would run it: its entry schema version is one
above this release's (run as ``python -m tests.faults.newer_worker worker ...``)."""

from __future__ import annotations

from saga.cli.main import main
from saga.worker import entries

if __name__ == "__main__":
    entries.SCHEMA_VERSION += 1
    main()
