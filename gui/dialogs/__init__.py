"""Dialogs: About, Quick start, device settings."""
