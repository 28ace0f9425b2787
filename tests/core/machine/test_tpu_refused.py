"""A grpc:// TPU address that refuses connections fails at once, before any child process or TensorFlow."""

import time

import psutil

from core.machine.tpu import probe_tpu, refused_at_once
from core.ports import free_ports


def test_a_refused_port_fails_at_once_with_what_to_check_and_no_child():
    [closed_port] = free_ports(1)  # nothing listens there
    address = f"grpc://127.0.0.1:{closed_port}"
    start = time.monotonic()
    probe = probe_tpu(address, timeout_s=30)
    assert time.monotonic() - start < 2, "no waiting out the 30 s limit when the port refuses"
    assert not probe.ok and probe.devices == ()
    assert f"TPU at {address!r} could not be reached" in probe.message
    assert f"Nothing listens at 127.0.0.1:{closed_port}" in probe.message and "8470" in probe.message
    assert not [p for p in psutil.Process().children(recursive=True) if "TPUClusterResolver" in " ".join(p.cmdline())]


def test_only_grpc_addresses_that_cannot_answer_are_refused_early(silent_tpu_address):
    assert refused_at_once(silent_tpu_address) == "", "a port that accepts gets the full probe"
    assert refused_at_once("local") == "" and refused_at_once("my-tpu-name") == ""
    assert "is not known" in refused_at_once("grpc://no-such-host.invalid:8470")
