"""Stand-ins for hardware this machine lacks (GPUs, their driver), each named as a fake."""
