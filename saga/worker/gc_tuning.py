"""Python's cycle collector in a long-running worker: the startup heap frozen, young
collections rarer.

A worker allocates a few hundred short-lived objects per step transition (claim
replies, tasks, futures, log events), nearly all freed at once by reference
counting. CPython's default starts a young collection every 700 net container
allocations, and from time to time a full one that rescans the whole heap,
including the ~50,000 objects a worker's imports leave behind. Freezing the
startup heap keeps the collector off it for good; a larger first threshold makes
young collections ~70 times rarer. Together they cut a worker's CPU per step
transition by 15-18% (paired runs draining no-op sagas; docs/benchmarks.md).
Cycles are still collected, later: at the default 50,000 objects that is a few
MiB at most between collections.
"""

from __future__ import annotations

import gc


def settle(threshold: int) -> None:
    """Collect, freeze what startup left, and set the young-generation threshold.

    Call once the process has imported and wired everything, before its work
    starts. ``threshold`` 0 leaves the collector as Python configured it."""
    if threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)
