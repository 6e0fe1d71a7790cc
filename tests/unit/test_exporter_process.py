"""The collector-process runner: reports cross the pipe, a killed child is replaced.

The child points at a port where nothing listens, so every cycle fails with
'unreachable' quickly: no Kafka needed.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from opskit.core.connection import ConnectionConfig
from opskit.exporter.options import ExporterOptions
from opskit.exporter.process import ProcessExporter

pytestmark = pytest.mark.timeout(120)


def _errors(body: bytes) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            if s.name == "opskit_exporter_collection_errors_total":
                out[s.labels["kind"]] = s.value
    return out


def _until(pred, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def test_child_reports_and_is_restarted_after_being_killed():
    opts = ExporterOptions(interval_s=0.5, collection_timeout_s=10, kafka_timeout_s=1,
                           log_dirs=False, kafka_python=False)
    ex = ProcessExporter(ConnectionConfig("127.0.0.1:1"), opts)
    ex.start()
    try:
        assert ex.wait_first_cycle(60)
        assert ex.ready() == (True, ex.ready()[1]) and "kafka down" in ex.ready()[1]
        _until(lambda: _errors(ex.scrape()).get("unreachable", 0) >= 2)
        first = ex.child_pid
        assert first is not None and first != os.getpid()
        os.kill(first, signal.SIGKILL)
        _until(lambda: ex.restarts == 1 and ex.child_pid not in (None, first))
        errs = _until(lambda: (e := _errors(ex.scrape())).get("internal", 0) >= 1 and e)
        assert errs["internal"] == 1  # the death, counted once
        # counters never go back across the restart, and the new child keeps reporting
        seen = [_errors(ex.scrape())["unreachable"]]
        _until(lambda: seen.append(_errors(ex.scrape())["unreachable"]) or seen[-1] >= seen[0] + 2)
        assert seen == sorted(seen)
        assert ex.healthy() == (True, "ok")
    finally:
        ex.stop()
    assert ex.child_pid is None
