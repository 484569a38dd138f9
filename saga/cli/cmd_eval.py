"""saga eval <dir>: score the extractor on a corpus of PDFs with their ground truth.

Exit 0 when every gate holds, 1 when one fails, 2 for bad usage (no such
directory, no truth files, an unreadable truth file).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from saga.cli.common import CliError, Exit, print_json


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "eval",
        help="score extraction on a corpus directory (PDFs with *.truth.json)",
        description=(
            "Run every PDF of DIR that has a <name>.truth.json beside it through the router "
            "and parser steps (rules extractor, no Redis; limits and thresholds from the SAGA_* "
            "settings as a worker reads them), compare the biomarkers with the "
            "truth, print figures per document and a total, and check the gates. "
            "Build the repository's corpus with: python -m tests.corpus.build DIR"
        ),
    )
    p.add_argument("directory", metavar="DIR", help="a directory of <name>.pdf + <name>.truth.json")
    p.add_argument("--max-wrong", type=int, default=0, help="most wrong values allowed (default 0)")
    p.add_argument(
        "--min-recall",
        type=_fraction,
        default=0.95,
        help="least exact recall over rows on text pages, 0..1 (default 0.95)",
    )
    p.add_argument(
        "--max-spurious",
        type=_fraction,
        default=0.02,
        help="largest share of extracted results that are spurious, 0..1 (default 0.02)",
    )
    p.add_argument("--only", default="", help="score only layouts whose name contains this")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="also list missed and spurious rows"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def main(args: argparse.Namespace) -> int:
    import anyio

    from saga.evaluation.evaluate import evaluate
    from saga.evaluation.report import render
    from saga.evaluation.score import Limits
    from saga.evaluation.truth import TruthError
    from saga.settings import load_settings

    if args.max_wrong < 0:
        raise CliError("--max-wrong cannot be negative.", Exit.USAGE)
    limits = Limits(
        max_wrong=args.max_wrong, min_recall=args.min_recall, max_spurious=args.max_spurious
    )
    directory = Path(args.directory)
    try:
        config = load_settings().step_config
        report = anyio.run(evaluate, directory, limits, args.only, config)
    except TruthError as exc:
        raise CliError(f"{exc}.", Exit.USAGE) from None
    if args.json:
        print_json(report)
    else:
        print(render(report, verbose=args.verbose))
    return Exit.OK if report.ok else Exit.FAILED
