"""What happens today to a saga in flight when the next release adds a step after the
one it just finished (docs/sagas.md, "When a type's steps change between releases"):
its next step was chosen by the worker that committed, so it skips the new step; a saga
whose step commits under the new release runs it. Real workers, a real server."""

from __future__ import annotations

from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from tests.executor.conftest import SpawnWorker
from tests.upgrade.release_sagas import finished_by, taken_by

pytestmark = pytest.mark.anyio


async def test_a_saga_past_the_insertion_point_skips_the_added_step(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys
) -> None:
    """A saga whose take v1 committed skips v2's added check; one started under v2 runs it."""
    k = await taken_by(spawn, settings, redis, "v1", "in-flight")  # v1's first step only
    trails = await finished_by(spawn, settings, redis, k, "v2", ["in-flight", "after-upgrade"])
    assert trails == {
        "in-flight": ["v1/take", "v2/ship"],
        "after-upgrade": ["v2/take", "v2/check", "v2/ship"],
    }
