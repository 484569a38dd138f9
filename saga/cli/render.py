"""One saga as text for people (used by ``saga demo``): the same view as ``saga show``."""

from __future__ import annotations

import time

from saga.state.model import HistoryEvent, Saga


def render_saga(saga: Saga, events: list[HistoryEvent]) -> str:
    from saga.cli.cmd_show import render

    return render(saga, events, int(time.time() * 1000))
