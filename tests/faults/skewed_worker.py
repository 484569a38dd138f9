"""``saga worker`` on a machine whose clock is off by ``SAGA_FAULT_CLOCK_SKEW`` seconds
(run as ``python -m tests.faults.skewed_worker worker ...``).

Every wall-clock read of the worker goes through Python's ``time.time``/``time_ns`` (and
``datetime``, which structlog does not use): shifting them is the whole machine's clock
as the worker sees it, with no system package (libfaketime) needed on CI machines.
Monotonic clocks (timeouts, sleeps) are untouched, as on a real machine."""

from __future__ import annotations

import os
import time

if __name__ == "__main__":
    skew = float(os.environ["SAGA_FAULT_CLOCK_SKEW"])
    real_time, real_time_ns = time.time, time.time_ns
    time.time = lambda: real_time() + skew
    time.time_ns = lambda: real_time_ns() + int(skew * 1e9)

    from saga.cli.main import main

    main()
