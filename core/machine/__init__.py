"""What this machine has: CPUs, GPUs (NVML) and TPUs (time-boxed probe), and process-wide TF settings."""
