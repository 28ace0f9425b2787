"""Keras backends other than TensorFlow: a JAX or PyTorch job trains in a child process of its own.

The backend is fixed when Keras is imported, and the app's process has imported
Keras on TensorFlow, so each such run is a `python -m core.backends.child_job`
child that imports no TensorFlow (it runs where only JAX or PyTorch is
installed). `available` says which backends are installed; `backend_run`
starts the child and turns its streamed step records into a `RunResult`.
"""
