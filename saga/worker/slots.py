"""Capacity of one step in one executor: reserve before reading, release when done."""

from __future__ import annotations

import anyio


class Slots:
    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self._freed = anyio.Event()

    def reserve(self, want: int) -> int:
        n = max(0, min(want, self.size - self.used))
        self.used += n
        return n

    def release(self, n: int) -> None:
        if n <= 0:
            return
        self.used -= n
        self._freed.set()

    async def wait_free(self) -> None:
        while self.used >= self.size:
            self._freed = anyio.Event()
            await self._freed.wait()
