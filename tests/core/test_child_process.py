"""The one child-process runner with real child processes: replies through noise, limits, stops, streams, orphans, crashes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from core.child_process import EXITED, STOPPED, TIMEOUT, Child, child_env
from tests.waiting import became_true

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups and orphan checks are POSIX")
DEADLINE_S = 30.0


def python(script: str, what: str = "the test child", **options) -> Child:
    """A child running `script` (dedented) with this interpreter; it can import core.child_process."""
    return Child([sys.executable, "-c", textwrap.dedent(script)], what, **options)


def gone(pid: int) -> bool:
    """Ended: no longer there, or a zombie waiting for a parent that is not ours."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_messages_and_the_reply_come_through_log_noise_on_both_streams():
    child = python(
        """
        import os, sys
        from core.child_process import reply, send
        print("stray print before the first message", flush=True)
        print("I0000 00:00:1.5   42 port.cc:1] chatter", file=sys.stderr, flush=True)
        send({"n": 1})
        os.write(1, b"C++ log written straight to fd 1, without a newline: ")
        send({"n": 2, "text": "two\\nlines"})
        reply({"answer": 42})
        print("a print after the reply")
        """
    )
    end = child.wait(DEADLINE_S)

    assert end.ok and end.how == EXITED
    assert list(child.messages()) == [{"n": 1}, {"n": 2, "text": "two\nlines"}]
    assert child.result == {"answer": 42}
    output = child.output()
    assert "stray print before the first message" in output and "C++ log written straight to fd 1" in output
    assert "a print after the reply" in output and "chatter" in output


def test_a_child_that_hangs_is_killed_at_its_time_limit_and_says_what_it_was_doing():
    started = time.monotonic()
    child = python(
        """
        import time
        from core.child_process import stage
        stage("waiting for a TPU")
        time.sleep(120)
        """,
        what="probing the TPU",
        limit_s=1.0,
    )
    end = child.wait(DEADLINE_S)

    assert end.how == TIMEOUT and end.returncode < 0 and end.doing == "waiting for a TPU"
    assert time.monotonic() - started < 1.0 + 10, "killed at its limit, not when it woke up"
    said = child.describe_end()
    assert said.startswith(child.what) and "within 1 s" in said and said.endswith(f"while {end.doing}")


@posix_only
def test_a_stop_event_kills_the_whole_group_grandchild_too():
    stop = threading.Event()
    child = python(
        """
        import subprocess, sys, time
        from core.child_process import send
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        send({"grandchild": grandchild.pid})
        time.sleep(120)
        """,
        stop_event=stop,
    )
    grandchild = next(child.messages())["grandchild"]
    assert not gone(grandchild)

    stop.set()
    end = child.wait(DEADLINE_S)

    assert end.how == STOPPED and end.returncode < 0
    assert became_true(lambda: gone(grandchild)), "the grandchild outlived the stop"
    assert child.describe_end() == "the test child was stopped"


def test_a_streaming_child_delivers_messages_in_order_while_it_runs_and_stops_when_asked():
    child = python(
        """
        from core.child_process import listen_to_parent, send
        stop = listen_to_parent()
        step = 0
        while not stop.is_set():  # one "call" per message, as a training loop would
            send({"step": step})
            step += 1
            stop.wait(0.01)
        send({"stopped_after": step})
        """,
        stop_grace_s=DEADLINE_S,
    )
    received = []
    for message in child.messages():
        received.append(message)
        if len(received) == 5:
            assert child.returncode is None, "the first messages arrive while the child still runs"
            child.stop()
    end = child.wait(DEADLINE_S)

    assert end.ok, "asked to stop, it ended by itself after its call in flight"
    steps = [m["step"] for m in received[:-1]]
    assert steps == list(range(len(steps))) and received[-1] == {"stopped_after": len(steps)}


def test_a_child_that_ignores_the_stop_line_is_killed_after_its_grace_time():
    child = python("import time; time.sleep(120)", stop_grace_s=0.5)
    started = time.monotonic()
    child.stop()
    end = child.wait(DEADLINE_S)
    assert end.how == STOPPED and 0.4 < time.monotonic() - started < 10


def outlived_its_parent(child_script: str, limit_s: float = DEADLINE_S) -> bool:
    """Run `child_script` as a Child of a parent process, kill the parent (SIGKILL: no clean-up) once the child has sent
    its first message, and say whether the child was still there `limit_s` later."""
    parent_script = textwrap.dedent(
        f"""
        import sys, time
        from core.child_process import Child
        child = Child([sys.executable, "-c", {child_script!r}], "orphan")
        next(child.messages())
        print(child.pid, flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        orphan = int(parent.stdout.readline())
        assert not gone(orphan)
        parent.kill()
        parent.wait()
        return not became_true(lambda: gone(orphan), limit_s)
    finally:
        parent.kill()
        parent.stdout.close()


@posix_only
def test_a_child_whose_parent_dies_exits():
    """The child sees its control pipe end and exits."""
    script = (
        "import time; from core.child_process import listen_to_parent, send; listen_to_parent(); send({'ready': True}); time.sleep(120)"
    )
    assert not outlived_its_parent(script), "the child outlived its parent"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's (prctl)")
def test_a_child_holding_the_gil_in_native_code_is_killed_with_its_parent():
    """A cluster worker in TensorFlow's set-up holds the GIL: the pipe's orphan timer cannot run, the kernel's signal can.

    `sum(range(...))` runs in C without letting another thread in: without `end_with_parent` this orphan ran on.
    """
    script = (
        "from core.child_process import end_with_parent, listen_to_parent, send; end_with_parent(); "
        "listen_to_parent(orphan_exit_s=0.5); send({'ready': True}); sum(range(10**14))"
    )
    assert not outlived_its_parent(script, 10), "the child outlived its parent by 10 s"


def test_a_crash_is_described_by_what_the_child_was_doing_and_its_code_not_by_log_noise():
    child = python(
        """
        import sys
        from core.child_process import stage
        stage("calling build_model()")
        print("ValueError: the model needs an input shape", file=sys.stderr)
        print("W0000 00:00:1.5   42 cpu_feature_guard.cc:1] This TensorFlow binary is optimized", file=sys.stderr)
        sys.exit(3)
        """,
        what="describing model.py",
    )
    end = child.wait(DEADLINE_S)

    assert end.how == EXITED and end.returncode == 3 and not end.ok
    said = child.describe_end()
    assert said.startswith(child.what) and "code 3" in said and f"while {end.doing}" in said
    assert said.endswith("ValueError: the model needs an input shape") and "TensorFlow binary" not in said  # its last words, not noise


@posix_only
def test_a_crash_by_signal_names_the_signal():
    child = python("import os; os.abort()", what="measuring")
    assert child.wait(DEADLINE_S).returncode < 0
    assert child.describe_end().startswith("measuring was killed by SIGABRT")


def test_a_poll_that_answers_kills_the_child_with_its_reason():
    polls = []

    def over_budget(child: Child) -> str:
        polls.append(child.pid)
        return "over the memory budget" if child.doing == "allocating" else ""

    child = python(
        "import time; from core.child_process import stage; stage('allocating'); time.sleep(120)",
        poll=over_budget,
        poll_s=0.02,
    )
    end = child.wait(DEADLINE_S)

    assert end.how == "over the memory budget" and end.returncode < 0 and polls
    said = child.describe_end()
    assert end.how in said and said.endswith(f"while {end.doing}")  # the poll's reason and what it was doing


def test_on_message_and_on_end_hear_everything_in_order():
    heard: list = []
    child = python(
        "from core.child_process import send\nfor i in range(50): send({'i': i})",
        on_message=heard.append,
        on_end=lambda end: heard.append(end.how),
    )
    child.wait(DEADLINE_S)
    assert heard == [{"i": i} for i in range(50)] + [EXITED]
    with pytest.raises(RuntimeError, match="on_message"):
        next(child.messages())


def test_a_child_left_in_a_with_block_is_killed_and_the_env_is_the_one_builder(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{}")
    with python(
        "import os, time; from core.child_process import reply; reply(dict(os.environ)); time.sleep(120)",
        env={"DEVICE_LAB_TEST": "yes", "TF_CONFIG": None},
        hide_gpus=True,
    ) as child:
        assert became_true(lambda: child.result is not None)
    assert child.end is not None and child.end.how == "killed"
    env = child.result
    assert env["DEVICE_LAB_TEST"] == "yes" and "TF_CONFIG" not in env and env["CUDA_VISIBLE_DEVICES"] == "-1"
    assert env["PYTHONPATH"] == child_env()["PYTHONPATH"] and env["TF_CPP_MIN_LOG_LEVEL"] == child_env()["TF_CPP_MIN_LOG_LEVEL"]


def test_wait_with_a_timeout_leaves_a_running_child_running():
    child = python("import time; time.sleep(120)", limit_s=DEADLINE_S)
    with pytest.raises(TimeoutError, match="still runs"):
        child.wait(0.2)
    assert child.returncode is None
    child.kill()
    assert child.wait(DEADLINE_S).how == "killed"
