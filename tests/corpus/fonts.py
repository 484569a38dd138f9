"""The DejaVu fonts the corpus draws arrows, the minus sign and ≤ with (core fonts are Latin-1).

They are a system package (``fonts-dejavu-core`` on Debian and Ubuntu, ``dejavu-sans-fonts``
on Fedora), not a Python one; when they are absent the corpus build stops with one
sentence saying what to install rather than drawing a document without its symbols.
"""

from __future__ import annotations

from pathlib import Path

FONT_DIRS = (
    Path("/usr/share/fonts/truetype/dejavu"),  # Debian, Ubuntu
    Path("/usr/share/fonts/dejavu-sans-fonts"),  # Fedora
    Path("/usr/share/fonts/dejavu"),
    Path("/usr/share/fonts/TTF"),  # Arch
    Path("/usr/local/share/fonts"),
    Path("/opt/homebrew/share/fonts"),
)
FILES = {
    "sans": "DejaVuSans.ttf",
    "sans-bold": "DejaVuSans-Bold.ttf",
    "mono": "DejaVuSansMono.ttf",
}


class FontsMissing(RuntimeError):
    """The DejaVu fonts are not installed."""


def font_path(kind: str) -> Path:
    """The file of one DejaVu face; FontsMissing with what to install when absent."""
    name = FILES[kind]
    for directory in FONT_DIRS:
        path = directory / name
        if path.is_file():
            return path
    looked = ", ".join(str(d) for d in FONT_DIRS)
    raise FontsMissing(
        f"the test corpus needs the DejaVu fonts ({name} not found in {looked}); "
        "install them, e.g. apt-get install fonts-dejavu-core"
    )
