"""A worker's cycle collector: the startup heap frozen and young collections rarer,
or left exactly as Python set it when the threshold is 0."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from saga.worker.gc_tuning import settle


@pytest.fixture
def restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_settle_freezes_the_heap_and_raises_the_young_threshold(restore_gc: None) -> None:
    gc.unfreeze()
    _, older, oldest = gc.get_threshold()
    survivor = [object() for _ in range(10)]  # startup objects: frozen, never rescanned
    settle(40_000)
    assert gc.get_threshold() == (40_000, older, oldest)
    assert gc.get_freeze_count() >= len(survivor)
    assert gc.isenabled()  # cycles are still collected, only less often


def test_threshold_zero_leaves_the_collector_alone(restore_gc: None) -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    settle(0)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
