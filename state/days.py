"""Today's UTC day as the cost and spend keys name it, for every caller of a commit's
billing (``machine``, ``undo_calls``): one small module both import."""

from __future__ import annotations

import time
from typing import Any

_DAY: list[Any] = [0.0, ("", "", "")]  # (end of the cached UTC day, its names)


def utc_day() -> tuple[str, str, str]:
    """Today's UTC date, its month and day of the month (``2026-12-01``, ``2026-12``,
    ``01``); strftime once a day, not once per transition."""
    now = time.time()
    if now >= _DAY[0]:
        _DAY[0] = (now // 86400 + 1) * 86400
        day = time.strftime("%Y-%m-%d", time.gmtime(now))
        _DAY[1] = (day, day[:7], day[8:])
    return _DAY[1]  # type: ignore[no-any-return]
