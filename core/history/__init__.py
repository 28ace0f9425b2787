"""The run history: a SQLite store of every run, and exports of stored runs."""
