"""The CLI's exit codes: other tools read them."""

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2
