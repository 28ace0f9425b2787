"""Headless subcommands: `python main.py devices | models | run | compare | history | export | worker`.

Progress goes to stderr, results to stdout (`--json` for one JSON document).
Exit codes: 0 completed, 1 failed or stopped run, 2 invalid input (the message
on stderr says which field, what was given and what is allowed).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from core.cli.exits import EXIT_BAD_INPUT
from core.cli.parser import build_parser
from core.config import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run one subcommand; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "worker":
        from core.cluster.worker import main as worker_main

        return worker_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    from core.logs import setup_logging

    setup_logging(verbose=getattr(args, "verbose", False))
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
