"""What the exporter's processes import once they have really collected from Kafka.

The unit test (``tests/unit/test_exporter_imports.py``) watches ``-X importtime`` with
no broker, where nothing past the first failed read runs. Here the exporter reads a
real broker, every family included (record times through librdkafka, the KRaft
quorum through kafka-python, sizes), and each process dumps its own ``sys.modules``:

* ``--once``: at exit;
* the served exporter: on SIGUSR1 (a handler installed by the harness before the
  exporter starts, inherited by the forked collector child), sent to the HTTP process
  and to its collector child once every family has been read.

The HTTP process only serves bytes: it must hold none of the collection code (Kafka
clients, snapshot build, status rules) nor a rich console; the child holds them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import commit, create_topic, produce, stop_process
from tests.unit.test_exporter_imports import check

ROOT = Path(__file__).resolve().parents[2]

#: runs the opskit console entry; dumps sys.modules to DUMP_DIR/<pid>.json at exit and
#: on SIGUSR1 (in whichever process receives it)
HARNESS = """
import atexit, json, os, signal, sys
def dump(*_):
    path = os.path.join(os.environ["DUMP_DIR"], f"{os.getpid()}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(sorted(sys.modules), f)
    os.replace(path + ".tmp", path)
signal.signal(signal.SIGUSR1, dump)
atexit.register(dump)
sys.argv = ["opskit", *sys.argv[1:]]
from opskit.cli.main import run
run()
"""

#: the collection code and what only it needs: never in the serving process
COLLECTION = {"opskit.exporter.collector", "opskit.exporter.engine", "opskit.exporter.assemble",
              "opskit.exporter.history", "opskit.adapters.kafka.admin.client",
              "opskit.adapters.lag.source", "opskit.core.status.quick"}
#: top-level packages the serving process must not hold
NOT_IN_SERVER = {"kafka", "confluent_kafka", "asyncio", "rich"}


def harness(bootstrap: str, dump: Path, *args: str) -> list[str]:
    return [sys.executable, "-P", "-c", HARNESS, "exporter", "-b", bootstrap, *args]


def env(dump: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "DUMP_DIR": str(dump)}


def modules(path: Path) -> set[str]:
    return set(json.loads(path.read_text()))


def tops(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def collected(text: str, topic: str, group: str) -> bool:
    """Exact lag and lag in seconds of the lagging partition, every family read."""
    v = samples(text)
    gp = (("consumergroup", group), ("partition", "0"), ("topic", topic))
    return (v.get(("kafka_consumergroup_lag", gp)) == 4
            and ("opskit_consumergroup_lag_seconds", gp) in v
            and all(v.get(("opskit_exporter_family_up", (("family", fam),))) == 1
                    for fam in ("metadata", "groups", "offsets", "topic_configs",
                                "broker_configs", "record_times", "log_dirs", "quorum",
                                "reassignments")))


def lagging_group(bs: str, uniq: str) -> tuple[str, str]:
    topic, group = f"imp_{uniq}", f"imp-g-{uniq}"
    create_topic(bs, topic, 2)
    produce(bs, topic, {0: 6, 1: 3})
    commit(bs, group, {(topic, 0): 2, (topic, 1): 3})  # lag 4 on partition 0: a record time read
    return topic, group


def test_once_against_a_real_broker_imports_only_what_it_uses(kafka, uniq, tmp_path):
    topic, group = lagging_group(kafka.bootstrap, uniq)
    r = subprocess.run(harness(kafka.bootstrap, tmp_path, "--once", "--group-allow", f".*{uniq}.*",
                               "--topic-allow", f".*{uniq}.*"),
                       capture_output=True, text=True, timeout=180, check=False, env=env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    # it really collected: exact lag, lag in seconds (a record time was read), every family
    assert collected(r.stdout, topic, group), r.stdout[-3000:]
    (dumped,) = tmp_path.glob("*.json")
    mods = modules(dumped)
    assert {"opskit.exporter.collector", "confluent_kafka", "kafka"} <= mods  # the readers ran
    check(mods)
    # one process, no server loop: no process pool, no rich console
    assert not tops(mods) & {"multiprocessing", "rich"}, sorted(tops(mods) & {"multiprocessing", "rich"})


def get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()  # type: ignore[no-any-return]
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return ""


def wait_for(what: str, cond, timeout: float = 120):  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_served_exporter_server_holds_no_collection_code(kafka, uniq, tmp_path):
    topic, group = lagging_group(kafka.bootstrap, uniq)
    err = tmp_path / "stderr"
    dump = tmp_path / "dump"
    dump.mkdir()
    with err.open("w") as f:
        proc = subprocess.Popen(
            harness(kafka.bootstrap, dump, "--port", "0", "--listen", "127.0.0.1",
                    "--interval", "2s", "--group-allow", f".*{uniq}.*",
                    "--topic-allow", f".*{uniq}.*"),
            stdout=subprocess.DEVNULL, stderr=f, env=env(dump))
    try:
        def port() -> int | None:
            assert proc.poll() is None, err.read_text()[-2000:]
            m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", err.read_text())
            return int(m.group(1)) if m else None

        url = f"http://127.0.0.1:{wait_for('the serving line', port)}/metrics"
        # every family read, the slow ones by the child's background thread included
        wait_for("every family read", lambda: collected(get(url), topic, group))
        child = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
        for pid in (proc.pid, child):
            os.kill(pid, signal.SIGUSR1)
        wait_for("both dumps", lambda: all((dump / f"{p}.json").exists() for p in (proc.pid, child)))
        server, collector = modules(dump / f"{proc.pid}.json"), modules(dump / f"{child}.json")
    finally:
        stop_process(proc)
    # the serving process: serving code only
    assert "opskit.exporter.server" in server and "prometheus_client" in server
    assert not server & COLLECTION, sorted(server & COLLECTION)
    assert not tops(server) & NOT_IN_SERVER, sorted(tops(server) & NOT_IN_SERVER)
    check(server)
    # the collector child: the collection code it runs, and still nothing forbidden
    assert COLLECTION <= collector, sorted(COLLECTION - collector)
    assert {"confluent_kafka", "kafka"} <= tops(collector)
    assert "rich" not in tops(collector)
    check(collector)
