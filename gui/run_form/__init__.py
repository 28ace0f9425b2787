"""The run form: model, device/strategy and knobs; the cluster and logging groups; parsed fields."""
