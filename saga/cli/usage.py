"""Bad usage in one sentence: the argument parser every command is built on.

argparse reports a missing positional before an unknown option, so ``saga start
-rec u1`` said "required: user_id" and never named ``-rec``; and it prints a usage
block. Here an unknown option is named first, and every usage error is one line
on stderr with exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn


class SagaArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one sentence naming the first unknown option."""

    _seen: list[str] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # Sub-commands' parsers are called here with their own part of argv.
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            first = message.split(": ", 1)[1].split(maxsplit=1)[0]
            message = (
                f"unknown option {first}"
                if first.startswith("-")
                else (f"unexpected argument {first!r}")
            )
        elif message.startswith("the following arguments are required"):
            # An unknown option took the place of a positional: name the option.
            unknown = self.unknown_options(self._seen or [])
            if unknown:
                message = f"unknown option {unknown[0]}"
        prog = self._command(self._seen or []).prog
        self.exit(2, f"{prog}: {message}; see `{prog} --help`.\n")

    def _command(self, argv: Sequence[str]) -> argparse.ArgumentParser:
        """The (sub-)command parser ``argv`` names: extras are reported by the top level."""
        parser: argparse.ArgumentParser = self
        for word in argv:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            if word.startswith("-") or not subs or word not in subs[0].choices:
                break
            parser = subs[0].choices[word]
        return parser

    def unknown_options(self, argv: Sequence[str]) -> list[str]:
        """The option-like words of ``argv`` that no option of this parser matches."""
        found = []
        for word in argv:
            if word == "--":
                break
            if not word.startswith("-") or word == "-" or _is_number(word):
                continue
            name = word.split("=", 1)[0]
            if name in self._option_string_actions:
                continue
            if name.startswith("--") and self.allow_abbrev and self._abbreviates(name):
                continue
            found.append(name)
        return found

    def _abbreviates(self, name: str) -> bool:
        return any(o.startswith(name) for o in self._option_string_actions if o.startswith("--"))


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
