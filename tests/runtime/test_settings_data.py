"""SAGA_RETENTION_DAYS: a number for completed sagas, or a retention per terminal state."""

from __future__ import annotations

import pytest

from saga.config.settings import SettingsError, load_settings
from saga.state.limits import DAY_S, KEPT, Retention


def _retention(value: str) -> Retention:
    return load_settings({"SAGA_DATA_DIR": "/t", "SAGA_RETENTION_DAYS": value}).limits.retention


def test_defaults_keep_failures_longer_than_successes() -> None:
    """Unset: completed 7 days, failed, cancelled and compensated 30, a failed
    compensation and a saga awaiting review 90."""
    r = load_settings({"SAGA_DATA_DIR": "/t"}).limits.retention
    assert r.table() == {"completed": 7 * DAY_S, "failed": 30 * DAY_S, "cancelled": 30 * DAY_S,
                         "compensated": 30 * DAY_S, "compensation_failed": 90 * DAY_S,
                         "needs_review": 90 * DAY_S}  # fmt: skip


def test_a_bare_number_is_the_completed_retention_as_before() -> None:
    """A number of days sets completed sagas' retention only (its meaning before states
    had their own); the others keep their defaults."""
    r = _retention("0.5")
    assert (r.completed_s, r.failed_s) == (DAY_S // 2, 30 * DAY_S)


def test_pairs_set_each_state_and_off_keeps_until_purged() -> None:
    """``state=days`` pairs, either spelling of needs-review, ``off`` for kept."""
    r = _retention("completed=30, failed=90,needs-review=off,compensation_failed=2190")
    assert (r.completed_s, r.failed_s, r.needs_review_s) == (30 * DAY_S, 90 * DAY_S, KEPT)
    assert r.compensation_failed_s == 2190 * DAY_S and r.cancelled_s == 30 * DAY_S
    assert r.arg().startswith("completed=2592000,failed=7776000,")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("finished=3", "the state one of"),
        ("failed=soon", "number of days or 'off'"),
        ("failed=-1", "must not be negative"),
        ("failed", "must be a number"),
    ],
)
def test_bad_values_are_one_sentence(value: str, says: str) -> None:
    """A value saga cannot use names the variable and what it expects."""
    with pytest.raises(SettingsError, match="SAGA_RETENTION_DAYS") as err:
        _retention(value)
    assert says in str(err.value)
