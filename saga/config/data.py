"""Settings of the data's life: ``SAGA_RETENTION_DAYS`` per terminal state.

Read by ``saga.config.settings.load_settings``; raises ValueError with one sentence for a value
it cannot use.
"""

from __future__ import annotations

from saga.state.limits import DAY_S, KEPT, Retention

_STATES = {
    "completed": "completed_s",
    "failed": "failed_s",
    "cancelled": "cancelled_s",
    "compensated": "compensated_s",
    "compensation_failed": "compensation_failed_s",
    "needs_review": "needs_review_s",
}
_KEEP = ("off", "never", "forever", "keep")


def retention_from(raw: str) -> Retention:
    """``SAGA_RETENTION_DAYS``: a number of days for completed sagas (as before states had
    their own), or ``state=days`` pairs separated by commas, e.g.
    ``completed=30,failed=90,needs_review=off`` (``off``: kept until purged). States not
    named keep their defaults (Retention)."""
    raw = raw.strip()
    if not raw:
        return Retention()
    if "=" not in raw:
        return Retention(completed_s=_seconds("completed", raw))
    given: dict[str, int] = {}
    for pair in raw.split(","):
        state, sep, days = (part.strip() for part in pair.partition("="))
        state = state.lower().replace("-", "_")
        if not sep or state not in _STATES:
            raise ValueError(
                f"SAGA_RETENTION_DAYS: {pair.strip()!r} must be <state>=<days>, the state "
                f"one of {', '.join(_STATES)}"
            )
        given[_STATES[state]] = _seconds(state, days)
    return Retention(**given)


def _seconds(state: str, days: str) -> int:
    if days.lower() in _KEEP:
        return KEPT
    try:
        value = float(days)
    except ValueError:
        raise ValueError(
            f"SAGA_RETENTION_DAYS: {state}={days!r} must be a number of days or 'off'"
        ) from None
    if not value >= 0:  # negative, or NaN
        raise ValueError(f"SAGA_RETENTION_DAYS: {state}={days!r} must not be negative")
    return int(value * DAY_S)
