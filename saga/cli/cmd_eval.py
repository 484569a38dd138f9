"""saga eval <dir>: score the extractor on a corpus of PDFs with their ground truth;
saga eval --grouping: score both groupers on the labelled biomarker names.

Exit 0 when every gate holds, 1 when one fails, 2 for bad usage (no such
directory, no truth files, an unreadable truth file). ``--grouping`` reports figures
and has no gate: exit 0 unless the embedding model could not be used (1).
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
    p.add_argument(
        "directory",
        metavar="DIR",
        nargs="?",
        help="a directory of <name>.pdf + <name>.truth.json (not with --grouping)",
    )
    p.add_argument(
        "--grouping",
        action="store_true",
        help="score the groupers instead: pairwise precision/recall on the labelled names "
        "of saga/evaluation/grouping_truth.py, offline and by embeddings",
    )
    p.add_argument(
        "--threshold",
        type=_fraction,
        default=None,
        help="--grouping: cosine similarity for the embedding grouper, 0..1 "
        "(default SAGA_GROUPER_EMBEDDING_THRESHOLD, 0.9)",
    )
    p.add_argument(
        "--embedding-model",
        default="",
        help="--grouping: a real litellm embedding model (key SAGA_LLM_API_KEY, base "
        "SAGA_GROUPER_EMBEDDING_API_BASE or SAGA_LLM_API_BASE; costs money) instead of the "
        "deterministic stand-in vectors",
    )
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
        default=0.01,
        help="largest share of extracted results that are spurious, 0..1 (default 0.01)",
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

    from saga.config.settings import load_settings
    from saga.evaluation.evaluate import evaluate
    from saga.evaluation.report import render
    from saga.evaluation.score import Limits
    from saga.evaluation.truth import TruthError

    if args.grouping:
        if args.directory:
            raise CliError("--grouping takes no directory; drop DIR or --grouping.", Exit.USAGE)
        return _grouping(args)
    if args.threshold is not None or args.embedding_model:
        raise CliError("--threshold and --embedding-model go with --grouping.", Exit.USAGE)
    if not args.directory:
        raise CliError("name a corpus directory, or use --grouping.", Exit.USAGE)
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


def _grouping(args: argparse.Namespace) -> int:
    import anyio

    from saga.config.settings import load_settings
    from saga.evaluation.grouping import DirectEmbedder, evaluate_grouping, render
    from saga.wiring.logs import configure_logging

    settings = load_settings()
    configure_logging(settings.log_format, "warning")  # on stderr: stdout is the report
    threshold = settings.step_config.embedding_threshold
    threshold = args.threshold if args.threshold is not None else threshold
    embedder = None
    if args.embedding_model:
        if not settings.llm_api_key:
            raise CliError("--embedding-model needs SAGA_LLM_API_KEY set.", Exit.USAGE)
        base = settings.grouper_embedding_api_base or settings.llm_api_base or None
        embedder = DirectEmbedder(
            args.embedding_model, settings.llm_api_key, base, settings.llm_timeout_s
        )
    report = anyio.run(evaluate_grouping, threshold, embedder)
    if args.json:
        print_json(report)
    else:
        print(render(report, verbose=args.verbose))
    return Exit.FAILED if any(s.warnings for s in report.scores) else Exit.OK
