"""Headless subcommands: `python main.py devices | models | run | compare | history | export | worker`.

Progress goes to stderr, results to stdout (`--json` for one JSON document).
Exit codes: 0 completed, 1 failed or stopped run, 2 invalid input (the message
on stderr says which field, what was given and what is allowed, why the
history cannot be used, or which model or data file cannot be used and why).
Ctrl-C, SIGTERM and SIGHUP stop a run after the call in flight
(`core.cli.signals`); elsewhere Ctrl-C ends the command without a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from core.cli.exits import EXIT_BAD_INPUT, EXIT_RUN_FAILED
from core.cli.parser import parse_arguments
from core.config import ConfigError
from core.history.database import StoreError
from core.workloads.model_file import ModelFileError


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run one subcommand; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "worker":
        from core.cluster.worker import main as worker_main

        return worker_main(argv[1:])
    args = parse_arguments(argv)
    from core.logs import setup_logging

    setup_logging(verbose=getattr(args, "verbose", False))
    try:
        return args.handler(args)
    except (ConfigError, StoreError, ModelFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_RUN_FAILED
    except BrokenPipeError:  # `main.py history | head`: the reader left; no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_RUN_FAILED
