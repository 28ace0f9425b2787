"""The training engine: sample models, data, strategies, the custom training loop and its statistics."""
