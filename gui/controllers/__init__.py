"""Job controllers: a run or a comparison from Start to the saved result (thread, stop flag, polling)."""
