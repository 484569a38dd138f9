"""Where log lines go: stderr, one write per event-loop turn instead of per line.

structlog's PrintLogger writes and flushes every line: a write(2) per step
transition, ~6 µs of the worker's CPU each (saga bench profile). Lines logged
while an asyncio loop runs are gathered and written together once the loop
turn's callbacks are done (well under a millisecond later); outside a loop,
or from another thread, a line is written at once. What is still buffered at
exit is written by an atexit hook, so a process that ends normally or by an
exception loses nothing; a SIGKILL loses at most the current turn's lines.
"""

from __future__ import annotations

import asyncio
import atexit
import sys
import threading
from typing import Any, TextIO


class LineWriter:
    """A structlog logger: every level method writes the rendered line."""

    def __init__(self, file: TextIO | None = None) -> None:
        self._file = file
        self._lines: list[str] = []
        self._scheduled = False
        self._lock = threading.Lock()
        atexit.register(self.flush)

    @property
    def file(self) -> TextIO:
        # Looked up at write time, so a test's capsys (which swaps sys.stderr) sees it.
        return self._file or sys.stderr

    def msg(self, message: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self.flush()
            self._write(message + "\n")
            return
        with self._lock:
            self._lines.append(message)
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            loop.call_soon(self.flush)

    log = debug = info = warn = warning = error = err = critical = fatal = exception = msg

    def flush(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            self._scheduled = False
        if lines:
            self._write("\n".join(lines) + "\n")

    def _write(self, text: str) -> None:
        try:
            self.file.write(text)
            self.file.flush()
        except (OSError, ValueError):  # stderr closed at shutdown: nothing to do
            pass


class LineWriterFactory:
    """structlog's logger_factory: one writer for the whole process."""

    def __init__(self, file: TextIO | None = None) -> None:
        self._writer = LineWriter(file)

    def __call__(self, *args: Any) -> LineWriter:
        return self._writer
