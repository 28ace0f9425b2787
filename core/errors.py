"""`ExplainedError`: a failure whose message already says, in words, what is wrong and what to do.

The CLI, the window and every job show such a message as it is, without the exception's class
name (`core.training.failures.explain_failure`); any other exception is said with its class name
and first line.
"""

from __future__ import annotations


class ExplainedError(Exception):
    """A failure worded for the user: its message is shown as it is. Subclasses also derive from the builtin they are
    (ValueError for refused input, RuntimeError for what could not be done), which callers catch."""
