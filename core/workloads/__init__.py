"""What a run trains on: the sample models and the data sets, described without importing TensorFlow."""
