"""A broker that accepts connections and never answers (black-holed, hung): a command
fails after the login probe (the whole timeout) and one short check whether the server is
an HTTP server (at most 1 s more), with one line (exit 3).

Before, the probe gave up after min(timeout, 5 s) and librdkafka then waited the whole
timeout again. What is asserted is not a duration (no timing assertions) but which
connections were made: the probe's and the HTTP check's; librdkafka never started, so it
could not add a wait.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from opskit.adapters.kafka import capabilities
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.cli import exits
from opskit.core.connection import ConnectionConfig
from opskit.errors import KafkaUnavailableError
from tests.helpers import SilentServer, run_cli


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    capabilities.clear_cache()
    with SilentServer() as srv:
        yield srv


def test_kafka_admin_fails_after_the_probe_alone(silent: SilentServer) -> None:
    t0 = time.monotonic()
    with KafkaAdmin(ConnectionConfig(silent.address), timeout=1.0) as admin, \
            pytest.raises(KafkaUnavailableError) as e:
        admin.metadata()
    assert str(e.value) == f"cannot reach Kafka at {silent.address} (no answer within timeout 1s)"
    assert len(silent.accepted) == 2  # the probe's and the HTTP check's; never librdkafka's
    assert time.monotonic() - t0 < 30  # never a hang (not a speed assertion)


@pytest.mark.parametrize("argv", [["topics", "diff"], ["acls", "diff"], ["dr", "snapshot"],
                                  ["reassign", "status"], ["health"]])
def test_commands_end_with_one_line_and_exit_3(silent: SilentServer, argv: list[str]) -> None:
    r = run_cli(*argv, "-b", silent.address, "--timeout", "1")
    assert r.code == exits.UNKNOWN == 3, r.err
    assert r.err.strip() == (f"opskit: error: cannot reach Kafka at {silent.address} "
                             "(no answer within timeout 1s)")
    assert len(silent.accepted) == 2


def test_several_addresses_still_leave_the_rest_to_librdkafka(silent: SilentServer) -> None:
    """With a second address the probe does not decide alone: a silent first address
    must not hide a live second one, so the command goes on to librdkafka (its error
    then names the operation). Here the second address refuses connections."""
    conn = ConnectionConfig(f"{silent.address},127.0.0.1:1")
    with KafkaAdmin(conn, timeout=1.0) as admin, pytest.raises(KafkaUnavailableError) as e:
        admin.metadata()
    assert "reading cluster metadata" in str(e.value)
    assert len(silent.accepted) >= 3  # the probe's, librdkafka's, the HTTP check's


def test_ctrl_c_is_one_line_and_exit_130(silent: SilentServer) -> None:
    """Ctrl-C while a command waits on a silent broker: 'interrupted' on one line and
    exit 130 (typer turned it into a silent 130)."""
    import signal
    import subprocess
    import sys

    # Ctrl-C as a terminal delivers it: the child gets Python's own SIGINT handler first. A
    # shell's background job (the CI runner's pytest is one) starts with SIGINT ignored, and
    # Python keeps an ignored SIGINT ignored, so the signal would never arrive
    start = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
             " sys.argv = ['opskit'] + sys.argv[1:];"
             " runpy.run_module('opskit.cli.main', run_name='__main__')")
    p = subprocess.Popen([sys.executable, "-c", start, "lag", "--all-groups", "-b",
                          silent.address, "--timeout", "60"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not silent.accepted:  # the command is waiting on the broker
        assert time.monotonic() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == exits.INTERRUPTED == 130, err
    assert err.strip() == "opskit: error: interrupted" and out == "", err
