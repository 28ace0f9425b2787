"""The job messages' one schema and codec: every kind survives the pipe, and a message that is not one is refused clearly."""

from __future__ import annotations

import json
import sys

import pytest

from core.child_process import Child
from core.job_messages import (
    MESSAGE_KINDS,
    CallBegun,
    Ended,
    Failed,
    Go,
    JobMessage,
    MessageError,
    Result,
    Started,
    Steps,
    Turn,
    decode,
    decode_as,
    encode,
)
from core.results import RunResult, RunStatus, StepRecord

ONE_OF_EACH: tuple[JobMessage, ...] = (
    Started(
        total_steps=200,
        replicas=2,
        devices=("CPU:0", "CPU:1"),
        environment={"keras": "3.10.0", "backend": "jax"},
        steps_per_call=4,
        memory_estimate={"weights_bytes": 1024},
        flops={"flops_per_step": 1.5e9, "method": "XLA cost analysis"},
        notes=("a note",),
        learning_rate=0.05,
    ),
    CallBegun(first_step=5, steps=4),
    Steps((StepRecord(1, 2.5, 0.25, True), StepRecord(2, 2.25, 0.0125, False)), peak_rss_bytes=300_000_000, device_peaks={"GPU:0": 2**30}),
    Turn(next_step=9),
    Go(until_step=12),
    Go(seconds=0.5),
    Result(RunResult(RunStatus.COMPLETED, {"model": "mlp"}, steps_done=2, losses=(2.5, 2.25), step_times_s=(0.25, 0.0125))),
    Failed("The model file mlp.keras is missing on this host."),
    Ended(error=None, peak_rss_bytes=300_000_000, tensorflow_imported=False, device_peaks={"GPU:0": 2**30, "GPU:1": 0}),
)


def test_every_kind_of_message_comes_back_equal_from_its_json() -> None:
    assert {type(message) for message in ONE_OF_EACH} == set(MESSAGE_KINDS), "a kind is missing from the round trip"
    for message in ONE_OF_EACH:
        assert decode(json.loads(json.dumps(encode(message)))) == message


def test_a_message_of_an_unknown_kind_is_refused_with_its_name_and_the_kinds_known() -> None:
    with pytest.raises(MessageError, match=r"unknown job message 'exited' \(known: start, call, steps, .*\)"):
        decode({"event": "exited", "code": 0})


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"event": "steps"}, r"malformed 'steps' message: no 'records'"),
        ({"event": "turn", "next_step": "soon"}, r"malformed 'turn' message \(ValueError: .*'soon'"),
        ({"event": "steps", "records": [[1, 2.0]]}, r"malformed 'steps' message \(ValueError: .*\)"),
        ({"stage": "importing jax"}, r"unknown job message None"),
        (["start"], r"a job message is a JSON object with an 'event', not \['start'\]"),
    ],
)
def test_a_malformed_message_is_refused_saying_what_is_wrong(data: object, said: str) -> None:
    with pytest.raises(MessageError, match=said):
        decode(data)


def test_a_message_of_another_kind_than_the_one_awaited_is_refused() -> None:
    with pytest.raises(MessageError, match="expected a 'go' message, got 'turn'"):
        decode_as(Go, encode(Turn(3)))


SENDER = """
import json, sys
from core import job_messages
for data in json.loads(sys.argv[1]):
    job_messages.send(job_messages.decode(data))
print("stray output, not a message")
"""


def test_messages_a_child_sends_arrive_in_its_parent_as_they_were_sent() -> None:
    sent = json.dumps([encode(message) for message in ONE_OF_EACH])
    with Child([sys.executable, "-c", SENDER, sent], "a sending child", limit_s=120) as child:
        heard = [decode(data) for data in child.messages()]
        assert child.wait().ok, child.output()
    assert heard == list(ONE_OF_EACH)
