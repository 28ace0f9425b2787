"""Device Lab entry point: no arguments start the window, a subcommand runs headless.

    python main.py                      # the desktop app
    python main.py devices | models | run | compare | history | export | worker ...
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Start the GUI, or run the CLI subcommand named in `argv`."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and not argv[0].startswith("-platform"):
        from core.cli import main as cli_main

        return cli_main(argv)
    from gui.app import run_app

    return run_app([sys.argv[0], *argv])


if __name__ == "__main__":
    sys.exit(main())
