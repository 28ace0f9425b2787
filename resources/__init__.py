"""Data shipped with Device Lab: the offline digits set, the style sheet and icons."""
