"""A rolling upgrade from the previous release's real code (its own venv) to this one,
under load, with every old worker killed -9 mid-step and replaced by a new one, then
``saga migrate`` if the schema changed: nothing lost, nothing committed twice, nothing
stuck (tests/upgrade/fleet.py; docs/reliability.md's rolling-upgrade row)."""

from __future__ import annotations

import pytest

from tests.faults.harness import FaultRun
from tests.upgrade.fleet import Plan, rolling_upgrade
from tests.upgrade.release_venv import Release

pytestmark = pytest.mark.anyio


async def test_rolling_upgrade(fleet_run: FaultRun, previous_release: Release) -> None:
    """Two old workers under load (16 sagas/s), two new join, each old one killed
    mid-step and replaced: every saga completes once per step across both releases."""
    tally = await rolling_upgrade(fleet_run, previous_release, Plan(old_workers=2, rate=16))
    assert (tally.lost, tally.double_commits, tally.stuck) == (0, 0, 0)


@pytest.mark.slow
async def test_rolling_upgrade_long(fleet_run: FaultRun, previous_release: Release) -> None:
    """The long form: four old workers under 40 sagas/s, each killed mid-step and
    replaced one by one while sagas keep arriving, then 30 s on the new release."""
    plan = Plan(old_workers=4, rate=40, settle_s=30, seed=11)
    tally = await rolling_upgrade(fleet_run, previous_release, plan)
    assert (tally.lost, tally.double_commits, tally.stuck) == (0, 0, 0)
