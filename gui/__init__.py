"""Device Lab's Qt front end: thin widgets over `core` (never imports TensorFlow at import time)."""

from gui import pyside_import_hook

pyside_import_hook.install()
