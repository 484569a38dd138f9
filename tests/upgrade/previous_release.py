"""The previous release, whose workers the rolling-upgrade test runs beside this one.

There are no release tags: a release is the commit it shipped from. Move ``COMMIT`` to
the new release's commit when one ships (the last landed stop on main); the fleet test
(tests/upgrade/test_rolling_upgrade.py) then runs that code's workers with this one's.
"""

from __future__ import annotations

COMMIT = "b957703e9cd7fe0470d14831f71073624b976068"
"""The last landed stop on main: test_host_crash's everysec undo (wave 3's end)."""
