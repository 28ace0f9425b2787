"""Device Lab's Qt front end: thin widgets over `core` (never imports TensorFlow at import time)."""
