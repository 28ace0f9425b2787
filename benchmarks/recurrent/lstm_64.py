"""A LSTM text classifier over 64 tokens: `benchmarks/gpu_points.py`'s recurrent point (a loop of 64 trips, issue 41).

Keras 3.15 runs a GRU on JAX as a scan, trip by trip, on any device, and an LSTM with its default settings through cuDNN on a
GPU: the two sequence lengths of the GRU tell a trip's cost, the LSTM whether cuDNN's kernels cost what the trips would.
"""

import keras

loss = "sparse_categorical_crossentropy"


def build_model():
    ids = keras.Input((64,), dtype="int32")
    hidden = keras.layers.LSTM(128)(keras.layers.Embedding(1000, 64)(ids))
    return keras.Model(ids, keras.layers.Dense(2, activation="softmax")(hidden))
