"""The engine and the HTTP endpoint with a fake source: no Kafka needed.

The fake source can block a cycle on an Event: a scrape answering while it is
blocked proves scrapes never wait on collection (the test would hang, and the
pytest timeout fail it, if they did).
"""

from __future__ import annotations

import base64
import gzip
import http.client
import shutil
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from opskit.core.lag import compute_group_lag
from opskit.core.models import GroupDescription, GroupState, PartitionOffsets, TopicPartition
from opskit.errors import KafkaUnavailableError, UsageError
from opskit.exporter.assemble import CycleInputs
from opskit.exporter.engine import Exporter
from opskit.exporter.options import ExporterOptions
from opskit.exporter.server import ExporterHTTPServer, WebConfig, serve_in_thread
from opskit.exporter.snapshot import BrokerSnap, PartitionSnap

pytestmark = pytest.mark.timeout(60)


class FakeSource:
    def __init__(self) -> None:
        self.now_ms = 1_000_000
        self.fail: BaseException | None = None
        self.block: threading.Event | None = None
        self.entered = threading.Event()
        self.groups = ["g1"]
        self.closed = False

    def collect(self) -> tuple[CycleInputs, int]:
        self.entered.set()
        if self.block is not None:
            self.block.wait()
        if self.fail is not None:
            raise self.fail
        tp = TopicPartition("t", 0)
        offs = {tp: PartitionOffsets(tp, 0, 50)}
        groups = [compute_group_lag(GroupDescription(g, GroupState.EMPTY), {tp: 40}, offs, {"t": 1})
                  for g in self.groups]
        inp = CycleInputs("c", 0, (BrokerSnap(0, "k:9092"),), (PartitionSnap("t", 0, 0, (0,), (0,)),),
                          groups, offs)
        return inp, self.now_ms

    def close(self) -> None:
        self.closed = True


def _values(body: bytes) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _engine(src: FakeSource, **kw) -> tuple[Exporter, Clock]:
    clock = Clock(1000.0)
    opts = ExporterOptions(**{"interval_s": 3600, "collection_timeout_s": 30, "stale_after_s": 60, **kw})
    return Exporter(src, opts, clock=clock), clock


def test_scrape_serves_snapshot_and_self_metrics():
    src = FakeSource()
    ex, _ = _engine(src)
    assert ex.ready()[0] is False
    ex.run_cycle()
    v = _values(ex.scrape())
    assert v["opskit_kafka_up"][()] == 1
    assert v["kafka_consumergroup_lag"][(("consumergroup", "g1"), ("partition", "0"), ("topic", "t"))] == 10
    assert v["opskit_exporter_snapshot_age_seconds"][()] == 0
    assert ex.ready()[0] is True
    assert gzip.decompress(ex.scrape(gzipped=True)) == ex.scrape()


def test_failure_keeps_stale_data_then_drops_it_and_recovers():
    src = FakeSource()
    ex, clock = _engine(src)
    ex.run_cycle()
    src.fail = KafkaUnavailableError("cannot reach Kafka")
    clock.t = 1030.0
    ex.run_cycle()
    v = _values(ex.scrape())
    assert v["opskit_kafka_up"][()] == 0
    assert v["opskit_exporter_collection_errors_total"][(("kind", "unreachable"),)] == 1
    assert v["opskit_exporter_snapshot_age_seconds"][()] == 30
    assert "kafka_consumergroup_lag" in v  # still within stale_after
    clock.t = 1061.0  # older than stale_after: only self-metrics
    v = _values(ex.scrape())
    assert "kafka_consumergroup_lag" not in v and "kafka_brokers" not in v
    assert v["opskit_kafka_up"][()] == 0
    src.fail = None
    src.now_ms = 1_062_000
    clock.t = 1062.0
    ex.run_cycle()
    v = _values(ex.scrape())
    assert v["opskit_kafka_up"][()] == 1 and "kafka_consumergroup_lag" in v


def test_internal_errors_are_counted_not_fatal():
    src = FakeSource()
    src.fail = ZeroDivisionError("boom")
    ex, _ = _engine(src)
    ex.run_cycle()
    ex.run_cycle()
    v = _values(ex.scrape())
    assert v["opskit_exporter_collection_errors_total"][(("kind", "internal"),)] == 2
    assert ex.healthy()[0] is True
    assert ex.ready() == (True, "kafka down: boom")


def test_vanished_group_series_are_removed():
    src = FakeSource()
    src.groups = ["g1", "g2"]
    ex, _ = _engine(src)
    ex.run_cycle()
    assert any(k[0] == ("consumergroup", "g2") for k in _values(ex.scrape())["kafka_consumergroup_members"])
    src.groups = ["g1"]
    src.now_ms += 15_000
    ex.run_cycle()
    body = ex.scrape().decode()
    assert 'consumergroup="g2"' not in body and 'consumergroup="g1"' in body


def test_scrape_answers_while_a_cycle_hangs_and_the_timeout_is_counted():
    src = FakeSource()
    ex, _ = _engine(src, collection_timeout_s=0.5)
    ex.run_cycle()
    src.block = threading.Event()
    src.entered.clear()
    t = threading.Thread(target=ex.run_cycle, daemon=True)
    t.start()
    assert src.entered.wait(10)
    # the cycle is blocked inside collect(): scrapes still answer, from the last snapshot
    v = _values(ex.scrape())
    assert "kafka_consumergroup_lag" in v
    # after the collection timeout the engine counts a timeout and reports Kafka down
    for _ in range(100):
        v = _values(ex.scrape())
        if v["opskit_exporter_collection_errors_total"][(("kind", "timeout"),)] == 1:
            break
        threading.Event().wait(0.1)
    assert v["opskit_exporter_collection_errors_total"][(("kind", "timeout"),)] == 1
    assert v["opskit_kafka_up"][()] == 0
    src.block.set()
    t.join(10)
    assert not t.is_alive()


def test_background_loop_starts_and_stops():
    src = FakeSource()
    ex, _ = _engine(src, interval_s=0.05)
    ex.start()
    assert ex.wait_first_cycle(10)
    ex.stop()
    assert src.closed


# --------------------------------------------------------------------------- HTTP


def _get(url: str, auth: tuple[str, str] | None = None, ctx: ssl.SSLContext | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers=headers or {})
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


@pytest.fixture
def served():
    src = FakeSource()
    ex, _ = _engine(src)
    servers: list[ExporterHTTPServer] = []

    def start(web: WebConfig) -> str:
        srv = ExporterHTTPServer(ex, web)
        servers.append(srv)
        serve_in_thread(srv)
        scheme = "https" if web.tls_cert else "http"
        return f"{scheme}://127.0.0.1:{srv.port}"

    yield ex, start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_http_endpoints(served):
    ex, start = served
    base = start(WebConfig("127.0.0.1", 0))
    assert _get(base + "/ready")[0] == 503  # no cycle yet
    code, body, hdrs = _get(base + "/metrics")
    assert code == 200 and hdrs["Content-Type"].startswith("text/plain; version=0.0.4")
    assert _values(body)["opskit_kafka_up"][()] == 0
    ex.run_cycle()
    assert _get(base + "/ready")[0] == 200
    assert _get(base + "/healthz")[0] == 200
    code, body, hdrs = _get(base + "/metrics", headers={"Accept-Encoding": "gzip"})
    assert hdrs.get("Content-Encoding") == "gzip"
    assert "kafka_consumergroup_lag" in _values(gzip.decompress(body))
    assert _get(base + "/nope")[0] == 404


def test_basic_auth(served):
    _, start = served
    base = start(WebConfig("127.0.0.1", 0, basic_auth_user="prom", basic_auth_password="s3cret"))
    assert _get(base + "/metrics")[0] == 401
    assert _get(base + "/metrics", auth=("prom", "wrong"))[0] == 401
    assert _get(base + "/metrics", auth=("prom", "s3cret"))[0] == 200
    assert _get(base + "/healthz")[0] == 200  # probes need no credentials


def test_tls(served, tmp_path: Path):
    _, start = served
    openssl = shutil.which("openssl")
    assert openssl, "the openssl command is needed to make a test certificate"
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    base = start(WebConfig("127.0.0.1", 0, tls_cert=str(cert), tls_key=str(key)))
    ctx = ssl.create_default_context(cafile=str(cert))
    code, body, _ = _get(base + "/metrics", ctx=ctx)
    assert code == 200 and b"opskit_kafka_up" in body
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(base.replace("https", "http") + "/metrics", timeout=5).read()


def test_web_config_validation():
    with pytest.raises(UsageError):
        WebConfig(tls_cert="c.pem")
    with pytest.raises(UsageError):
        WebConfig(basic_auth_user="u")


def test_scrape_arrived_is_part_of_servable():
    """The endpoint tells every Servable when a GET of /metrics arrives (HEAD and the
    other paths are no scrapes); StreamNest's engine takes it and ignores it."""
    from opskit.cli.streamnest import StreamNestExporter

    class Recording:
        def __init__(self) -> None:
            self.arrived: list[str] = []

        def scrape(self, gzipped: bool = False) -> bytes:
            return b"x 1\n"

        def healthy(self) -> tuple[bool, str]:
            return True, "ok"

        def ready(self) -> tuple[bool, str]:
            return True, "ok"

        def scrape_arrived(self, at: float, client: str) -> None:
            self.arrived.append(client)

    rec = Recording()
    srv = ExporterHTTPServer(rec, WebConfig("127.0.0.1", 0))
    serve_in_thread(srv)
    try:
        base = f"http://127.0.0.1:{srv.port}"
        assert _get(base + "/metrics")[0] == 200
        assert _get(base + "/ready")[0] == 200
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("HEAD", "/metrics")
        assert conn.getresponse().status == 200
        conn.close()
        assert rec.arrived == ["127.0.0.1"]
    finally:
        srv.shutdown()
        srv.server_close()
    sn = StreamNestExporter(["127.0.0.1:1"], 15.0, 1.0)
    before = sn.scrape()
    assert sn.scrape_arrived(0.0, "127.0.0.1") is None
    assert sn.scrape() == before
