"""One saga as text for people (used by ``saga demo``): header and timeline."""

from __future__ import annotations

from saga.state.model import HistoryEvent, Saga


def render_saga(saga: Saga, events: list[HistoryEvent], *, tty: bool = False) -> str:
    from saga.cli import timeline

    if not hasattr(timeline, "render"):
        lines = [f"{saga.record_id}  {saga.state.value} at {saga.step}"]
        lines += [f"  {e.event.value:16} {e.step:8} a{e.attempt} {e.error_class}" for e in events]
        return "\n".join(lines)
    return timeline.render(saga, events, tty=tty)  # type: ignore[no-any-return]
