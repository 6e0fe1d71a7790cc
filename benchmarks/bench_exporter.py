"""Benchmark: `opskit exporter` on a big sandbox cluster, against kafka_exporter and KMinion.

One real Kafka broker (sandbox, Kafka 3.7; `--compare` with `--brokers N`: N brokers,
the topics' partitions spread over them at replication factor 1, since one broker JVM
cannot hold 50,000 partitions here: one open file per partition's segment against
`ulimit -n` 20,000), P partitions in topics of 100
partitions, G consumer groups, each committed on every partition of one topic
(group g on topic g % topics, committed offset (g + partition) % 6 with 5
records per partition, so the true lag of every group-partition is known:
max(0, 5 - committed)). Then:

* `opskit exporter` runs as its own process; once its first cycle is done it is
  scraped N times (with `Accept-Encoding: gzip`, like Prometheus), spread over
  several collection cycles so scrapes also land while a cycle runs. Reported:
  scrape latency p50/p99, collection cycle time (its own self-metric), CPU
  seconds per cycle and RSS (current and peak, from /proc).
* kafka_exporter and KMinion, when scripts/install-exporters.sh could build them,
  are run against the same cluster and scraped the same way; their latency,
  CPU and RSS ratios and whether their `kafka_consumergroup_lag` equals opskit's
  are reported. When they could not be built, the benchmark says why and goes on.
* opskit's lag is also checked against the known truth, series by series.

`--compare 2000x200,10000x500` runs the three exporters side by side, in one run
per size (a fresh sandbox cluster each): opskit, KMinion and kafka_exporter are
started together against the same cluster and each is scraped every `--every`
seconds (15, like Prometheus) for `--duration` seconds, in a thread of its own.
`--phase fixed` scrapes each exporter at one random offset within the period for
the whole run, as Prometheus does (it derives a target's offset once; no
per-scrape jitter); `--phase random` (the default, as in the earlier recorded
runs) picks a new random phase within every period, which no Prometheus does but
which averages over phases. With `--phase fixed` opskit's schedule can align to
the scrapes (`opskit_exporter_schedule_aligned`), so its ages are also reported
over the aligned scrapes only (it needs 4 scrapes, a minute at 15 s, to align).
`--interval` is the exporter's collection interval (15s; the issue's goal at 50,000 x
2,000 is a 30 s interval, so `--interval 30s --every 30`). The set-up time, each broker's
open files, memory maps and RSS after the set-up and at the end, and the size of the
scraped text are reported with each size, for where the limit is.
`--opskit-fixed` adds a second opskit exporter with `--no-align-to-scrapes`, scraped
the same way in the same run, as the fixed-schedule baseline at the same load.
`--opskit-baseline TREE` adds the exporter of another checkout (for example a `git
archive` of main), scraped the same way in the same run: before/after at the same load.
A probe producer writes one record a second to a one-partition probe topic whose
group committed offset 0, noting when each record was acknowledged: the probe
group's lag in a scrape names the last record the exporter had seen, so the age
of the lag the scrape returned is the scrape's end minus the time between that
record's acknowledgement and the next one's (midpoint; resolution +-0.5 s).
Reported per exporter: scrape p50/p99, median and p95 age, CPU seconds per
minute and peak RSS of its process tree (from /proc), value equality of every
per-partition lag against the known truth, and ratios against the peers; the
1-minute load average is recorded with every figure.

`--soak 600` instead runs a soak: the exporter collects every `--interval`
while groups are created and deleted; RSS is sampled over time, and after each
deletion the next scrapes must not hold the deleted group's series.

    python benchmarks/bench_exporter.py [--partitions 10000] [--groups 500] [--scrapes 200]
    python benchmarks/bench_exporter.py --soak 600 [--partitions 10000] [--groups 500]
    python benchmarks/bench_exporter.py --compare 2000x200,10000x500 [--duration 300] [--phase fixed]
    python benchmarks/bench_exporter.py --compare 50000x2000 --brokers 4 --interval 30s --every 30 \
        --duration 600 --phase fixed
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.helpers import stop_process

CACHE = Path(os.environ.get("OPSKIT_CACHE", Path.home() / ".cache" / "opskit"))
BIN = CACHE / "compat" / "bin"
STATUS = CACHE / "compat" / "exporters.status"
PEER_NAMES = ("kminion", "kafka_exporter")
#: the peers this run measures (``--peers``)
PEERS: set[str] = set(PEER_NAMES)
RECORDS_PER_PARTITION = 5
PER_TOPIC = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def proc_stats(pid: int) -> dict[str, float]:
    """CPU seconds (user+system), RSS, peak RSS (VmHWM) and PSS in MB, from /proc,
    summed over the process and its children (opskit collects in a child process).
    PSS splits shared pages between processes, so it does not double count."""
    tot = {"cpu_s": 0.0, "rss_mb": 0.0, "peak_rss_mb": 0.0, "pss_mb": 0.0, "processes": 0.0}
    for p in descendants(pid):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            status = Path(f"/proc/{p}/status").read_text()
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        tot["cpu_s"] += (int(fields[11]) + int(fields[12])) / CLK_TCK
        kb = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.MULTILINE)}
        tot["rss_mb"] += kb.get("VmRSS", 0) / 1024
        tot["peak_rss_mb"] += kb.get("VmHWM", 0) / 1024
        m = re.search(r"^Pss:\s+(\d+) kB", rollup, re.MULTILINE)
        tot["pss_mb"] += int(m.group(1)) / 1024 if m else 0
        tot["processes"] += 1
    return tot


def broker_stats(pids: list[int]) -> list[dict[str, float]]:
    """Per broker JVM: open files, memory maps, RSS and peak RSS (MB) from /proc, the
    limits one broker meets first as its partitions grow (``ulimit -n``,
    ``vm.max_map_count``, the machine's memory)."""
    out = []
    for pid in pids:
        try:
            fds = sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
            maps = Path(f"/proc/{pid}/maps").read_text().count("\n")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            out.append({"pid": pid, "gone": 1.0})
            continue
        kb = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.MULTILINE)}
        out.append({"pid": pid, "fds": fds, "maps": maps, "rss_mb": kb.get("VmRSS", 0) / 1024,
                    "peak_rss_mb": kb.get("VmHWM", 0) / 1024})
    return out


def scrape(url: str, timeout: float = 120.0) -> tuple[float, bytes]:
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
        enc = r.headers.get("Content-Encoding")
    dt = time.perf_counter() - t0
    return dt, gzip.decompress(body) if enc == "gzip" else body


def parse(text: bytes, names: set[str]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for line in text.decode(errors="replace").splitlines():
        if not line or line[0] == "#":
            continue
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in names:
            continue
        labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
        out.setdefault(m.group(1), {})[labels] = float(m.group(3))
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"process exited rc={proc.returncode}: "
                             f"{(proc.stderr.read() if proc.stderr else b'').decode()[-1000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} not ready within {timeout:.0f}s")


def wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"process exited rc={proc.returncode}")
        with socket.socket() as s:
            s.settimeout(2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise SystemExit(f"port {port} not listening within {timeout:.0f}s")


def ready_text(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return str(r.read().decode(errors="replace"))
    except urllib.error.HTTPError as e:
        return str(e.read().decode(errors="replace"))
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return ""


def self_metric(url: str, name: str) -> float | None:
    _, body = scrape(url)
    v = parse(body, {name}).get(name, {})
    return next(iter(v.values()), None)


# --------------------------------------------------------------------------- cluster


def build_cluster(bs: str, partitions: int, groups: int) -> list[str]:
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    n_topics = max(1, partitions // PER_TOPIC)
    topics = [f"bench_t{i:03d}" for i in range(n_topics)]
    t0 = time.time()
    for i in range(0, n_topics, 10):  # 1,000 partitions per CreateTopics
        for f in admin.create_topics([NewTopic(t, PER_TOPIC, 1) for t in topics[i:i + 10]],
                                     operation_timeout=120).values():
            f.result(300)
    while True:  # every partition has a leader
        md = admin.list_topics(timeout=30)
        ready = sum(1 for t in topics if t in md.topics and len(md.topics[t].partitions) == PER_TOPIC
                    and all(p.leader >= 0 for p in md.topics[t].partitions.values()))
        if ready == n_topics:
            break
        time.sleep(1)
    print(f"  {n_topics} topics x {PER_TOPIC} partitions created in {time.time() - t0:.0f}s", flush=True)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 50, "batch.num.messages": 10000})
    for t in topics:
        for part in range(PER_TOPIC):
            for _ in range(RECORDS_PER_PARTITION):
                while True:
                    try:
                        p.produce(t, value=b"x" * 100, partition=part)
                        break
                    except BufferError:  # librdkafka's queue is full (250,000 records at 50,000)
                        p.poll(1)
        p.poll(0)
    p.flush(300)
    t1 = time.time()
    futs = []
    for g in range(groups):
        t = topics[g % n_topics]
        tps = [CkTP(t, part, (g + part) % 6) for part in range(PER_TOPIC)]
        futs += admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_name(g), tps)]).values()
    for f in futs:
        f.result(120)
    # every group must exist with its offsets before measuring (a commit can be lost
    # while __consumer_offsets partitions are still loading on a fresh broker)
    for _attempt in range(5):
        res = admin.list_consumer_groups().result(60)
        have = {g.group_id for g in res.valid}
        missing = [g for g in range(groups) if group_name(g) not in have]
        if not missing:
            break
        print(f"  re-committing {len(missing)} group(s) that did not stick", flush=True)
        again: list[Any] = []  # all at once, as the first commits (one by one took minutes at 2,000 groups)
        for g in missing:
            t = topics[g % n_topics]
            tps = [CkTP(t, part, (g + part) % 6) for part in range(PER_TOPIC)]
            again += admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group_name(g), tps)]).values()
        for f in again:
            f.result(120)
        time.sleep(2)
    else:
        raise SystemExit(f"groups still missing after retries: {missing[:5]}")
    print(f"  {n_topics * PER_TOPIC * RECORDS_PER_PARTITION} records produced and {groups} groups "
          f"committed in {time.time() - t1:.0f}s", flush=True)
    return topics


def group_name(g: int) -> str:
    return f"bench-group-{g:04d}"


def true_lags(topics: list[str], groups: int) -> dict[tuple[str, str, str], float]:
    out = {}
    for g in range(groups):
        t = topics[g % len(topics)]
        for part in range(PER_TOPIC):
            out[(group_name(g), t, str(part))] = float(max(0, RECORDS_PER_PARTITION - (g + part) % 6))
    return out


#: per-partition group lag as each exporter names it: metric -> (group, topic, partition) labels
LAG_FAMILIES = {
    "kafka_consumergroup_lag": ("consumergroup", "topic", "partition"),  # opskit, kafka_exporter
    "kminion_kafka_consumer_group_topic_partition_lag": ("group_id", "topic_name", "partition_id"),
}


def lag_table(text: bytes) -> dict[tuple[str, str, str], float]:
    fams = parse(text, set(LAG_FAMILIES))
    out = {}
    for name, (g, t, p) in LAG_FAMILIES.items():
        for labels, val in fams.get(name, {}).items():
            d = dict(labels)
            out[(d.get(g, ""), d.get(t, ""), d.get(p, ""))] = val
    return out


# --------------------------------------------------------------------------- exporters


def start_opskit(bs: str, port: int, interval: str, extra: list[str],
                 tree: Path = ROOT) -> subprocess.Popen[bytes]:
    """`opskit exporter` of the checkout at ``tree`` (default: this one)."""
    cmd = [sys.executable, "-m", "opskit.cli.main", "exporter", "-b", bs, "--port", str(port),
           "--listen", "127.0.0.1", "--interval", interval, "--timeout", "30", *extra]
    return subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=str(tree),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def start_competitor(name: str, bs: str, port: int) -> subprocess.Popen[bytes] | None:
    exe = BIN / name
    if name not in PEERS or not exe.exists():
        return None
    if name == "kafka_exporter":
        cmd = [str(exe), f"--kafka.server={bs}", f"--web.listen-address=127.0.0.1:{port}"]
        env = dict(os.environ)
    else:  # kminion: configured through environment variables
        cmd = [str(exe)]
        env = {**os.environ, "KAFKA_BROKERS": bs, "EXPORTER_PORT": str(port),
               "EXPORTER_HOST": "127.0.0.1", "MINION_CONSUMERGROUPS_SCRAPEMODE": "adminApi",
               "MINION_CONSUMERGROUPS_GRANULARITY": "partition"}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def why_missing(name: str) -> str:
    if name not in PEERS:
        return "left out (--peers)"
    if STATUS.exists():
        for line in STATUS.read_text().splitlines():
            if line.startswith(name + " "):
                return line[len(name) + 1:]
    return "not built (run scripts/install-exporters.sh)"


def measure(name: str, proc: subprocess.Popen[bytes], url: str, scrapes: int, spacing: float
            ) -> dict[str, Any]:
    s0 = proc_stats(proc.pid)
    t0 = time.time()
    lat: list[float] = []
    body = b""
    for _ in range(scrapes):
        dt, body = scrape(url)
        lat.append(dt)
        time.sleep(spacing)
    s1 = proc_stats(proc.pid)
    return {"name": name, "scrapes": len(lat), "p50_ms": pct(lat, 0.5) * 1000,
            "p99_ms": pct(lat, 0.99) * 1000, "max_ms": max(lat) * 1000,
            "cpu_s": s1["cpu_s"] - s0["cpu_s"], "wall_s": time.time() - t0,
            "rss_mb": s1["rss_mb"], "peak_rss_mb": s1["peak_rss_mb"], "pss_mb": s1["pss_mb"],
            "processes": s1["processes"], "last_body": body,
            "series": sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))}


# --------------------------------------------------------------------------- modes


def run_bench(bs: str, topics: list[str], args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    proc = start_opskit(bs, port, args.interval, args.exporter_args.split())
    report: dict[str, Any] = {}
    try:
        wait_http(f"http://127.0.0.1:{port}/ready", 600, proc)
        while self_metric(url, "opskit_kafka_up") != 1.0:
            time.sleep(1)
        print("  opskit: first cycle done", flush=True)
        durations: list[float] = []
        cycles0 = self_metric(url, "opskit_exporter_collections_total") or 0
        cpu0 = proc_stats(proc.pid)["cpu_s"]
        m = measure("opskit", proc, url, args.scrapes, args.spacing)
        # cycle durations: one reading per finished cycle during a few more cycles
        seen = cycles0
        t_end = time.time() + 3 * float(args.interval.rstrip("s"))
        while time.time() < t_end:
            c = self_metric(url, "opskit_exporter_collections_total") or 0
            if c > seen:
                d = self_metric(url, "opskit_exporter_collection_duration_seconds")
                if d is not None:
                    durations.append(d)
                seen = c
            time.sleep(0.5)
        cycles = (self_metric(url, "opskit_exporter_collections_total") or 0) - cycles0
        cpu = proc_stats(proc.pid)["cpu_s"] - cpu0
        m["cycles"] = cycles
        m["cycle_s_median"] = statistics.median(durations) if durations else None
        m["cycle_s_max"] = max(durations) if durations else None
        m["cpu_s_per_cycle"] = cpu / cycles if cycles else None
        m.update({k: v for k, v in proc_stats(proc.pid).items() if k != "cpu_s"})
        errs = parse(m["last_body"], {"opskit_exporter_collection_errors_total"})
        m["errors"] = {dict(k)["kind"]: v for k, v in errs.get("opskit_exporter_collection_errors_total", {}).items() if v}
        truth = true_lags(topics, args.groups)
        got = lag_table(m["last_body"])
        wrong = [k for k, v in truth.items() if got.get(k) != v]
        m["lag_vs_truth"] = {"compared": len(truth), "mismatches": len(wrong), "examples": wrong[:5]}
        report["opskit"] = m
    finally:
        stop_process(proc)
    for name in ("kafka_exporter", "kminion"):
        cport = free_port()
        cproc = start_competitor(name, bs, cport)
        if cproc is None:
            report[name] = {"name": name, "missing": why_missing(name)}
            continue
        curl = f"http://127.0.0.1:{cport}/metrics"
        try:
            wait_http(curl, 300, cproc)
            scrape(curl)  # warm-up: both competitors query Kafka on the first scrape
            c = measure(name, cproc, curl, args.competitor_scrapes, args.spacing)
            theirs = lag_table(c["last_body"])
            ours = lag_table(report["opskit"]["last_body"])
            common = set(theirs) & set(ours)
            c["lag_agreement"] = {"common_series": len(common),
                                  "equal": sum(1 for k in common if theirs[k] == ours[k]),
                                  "only_theirs": len(set(theirs) - set(ours)),
                                  "only_opskit": len(set(ours) - set(theirs))}
            report[name] = c
        except SystemExit as e:
            report[name] = {"name": name, "missing": f"did not start: {e}"}
        finally:
            stop_process(cproc)
    return report


PROBE_TOPIC, PROBE_GROUP = "bench_probe", "bench-probe-group"


class Probe:
    """One record a second to the probe topic; remembers when each was acknowledged."""

    def __init__(self, bs: str) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as CkTP
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(PROBE_TOPIC, 1, 1)]).values():
            f.result(60)
        time.sleep(2)
        for f in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                PROBE_GROUP, [CkTP(PROBE_TOPIC, 0, 0)])]).values():
            f.result(60)
        self.bs = bs
        #: acks[v - 1] = when the record that made the log end v was acknowledged
        self.acks: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bs, "acks": "all", "linger.ms": 0})
        while not self._stop.is_set():
            t0 = time.time()
            p.produce(PROBE_TOPIC, value=b"probe", partition=0)
            p.flush(30)
            self.acks.append(time.time())
            self._stop.wait(max(0.0, 1.0 - (time.time() - t0)))

    def age(self, lag: float, seen_at: float) -> float | None:
        """Age of a probe lag value seen in a scrape that ended at ``seen_at``."""
        v = int(lag)
        if v < 1 or v > len(self.acks):
            return None
        lo = self.acks[v - 1]
        hi = self.acks[v] if v < len(self.acks) else seen_at
        return max(0.0, seen_at - (lo + min(hi, seen_at)) / 2)


def _lines_with(text: bytes, needle: bytes) -> bytes:
    """Only the lines holding ``needle`` (found with bytes.find: parsing a whole body
    of 20,000+ series in Python holds the interpreter lock for seconds on a loaded
    machine, which delayed the other exporters' scrape threads by seconds)."""
    out, i = [], text.find(needle)
    while i >= 0:
        start = text.rfind(b"\n", 0, i) + 1
        end = text.find(b"\n", i)
        end = len(text) if end < 0 else end
        out.append(text[start:end])
        i = text.find(needle, end)
    return b"\n".join(out)


def probe_lag(text: bytes) -> float | None:
    for (g, t, p), v in lag_table(_lines_with(text, PROBE_GROUP.encode())).items():
        if g == PROBE_GROUP and t == PROBE_TOPIC and p == "0":
            return v
    return None


_OWN = {"opskit_exporter_collection_duration_seconds", "opskit_exporter_schedule_aligned",
        "opskit_exporter_scrape_period_seconds", "opskit_exporter_snapshot_age_seconds"}


def scrape_loop(name: str, url: str, proc: subprocess.Popen[bytes], probe: Probe, every: float,
                until: float, out: dict[str, Any], phase: str = "random") -> None:
    """Scrape every ``every`` s (back to back when a scrape takes longer) until ``until``.

    ``phase`` "fixed": at one random offset within the period for the whole run, as
    Prometheus does; "random": at a new random phase within every period. opskit's own
    cycle duration and schedule are read from the same scrapes (a second poller would be
    a second scraper at another phase)."""
    lat: list[float] = []
    ages: list[float] = []
    aligned_ages: list[float] = []
    cycles: list[float] = []
    aligned_flags: list[float] = []
    periods: list[float] = []
    loads: list[float] = []
    failures = 0
    body = b""
    s0 = proc_stats(proc.pid)
    t_start = time.time()
    rng = random.Random(name)
    offset = rng.uniform(0.0, every)
    k = 0
    while time.time() < until:
        # fixed: Prometheus' offset, once per target; random: averages over phases
        next_at = t_start + k * every + (offset if phase == "fixed" else rng.uniform(0.0, every))
        k += 1
        time.sleep(max(0.0, next_at - time.time()))
        if time.time() >= until:
            break
        try:
            dt, text = scrape(url, timeout=300)
        except (OSError, urllib.error.URLError) as e:
            failures += 1
            out.setdefault("errors", []).append(str(e)[:200])
            continue
        seen = time.time()
        lat.append(dt)
        body = text
        lag = probe_lag(text)
        age = probe.age(lag, seen) if lag is not None else None
        own = {n: next(iter(v.values()), None)
               for n, v in parse(_lines_with(text, b"opskit_exporter_s"), _OWN).items()}
        own.update({n: next(iter(v.values()), None) for n, v in parse(
            _lines_with(text, b"opskit_exporter_collection_duration"), _OWN).items()})
        is_aligned = own.get("opskit_exporter_schedule_aligned")
        if own.get("opskit_exporter_collection_duration_seconds") is not None:
            cycles.append(own["opskit_exporter_collection_duration_seconds"] or 0.0)
        if is_aligned is not None:
            aligned_flags.append(is_aligned)
        if own.get("opskit_exporter_scrape_period_seconds") is not None:
            periods.append(own["opskit_exporter_scrape_period_seconds"] or 0.0)
        if age is not None:
            ages.append(age)
            if is_aligned == 1:
                aligned_ages.append(age)
        out.setdefault("per_scrape", []).append({
            "at": round(seen - t_start, 2), "ms": round(dt * 1000, 1),
            "age_s": None if age is None else round(age, 2), "aligned": is_aligned,
            "cycle_s": own.get("opskit_exporter_collection_duration_seconds"),
            "snapshot_age_s": own.get("opskit_exporter_snapshot_age_seconds"),
            "load_1m": os.getloadavg()[0]})
        loads.append(os.getloadavg()[0])
        k = max(k, int((time.time() - t_start) // every))  # a scrape longer than a period
    s1 = proc_stats(proc.pid)
    wall = time.time() - t_start
    out.update({
        "name": name, "scrapes": len(lat), "failed_scrapes": failures,
        "p50_ms": pct(lat, 0.5) * 1000 if lat else None,
        "p99_ms": pct(lat, 0.99) * 1000 if lat else None,
        "age_median_s": statistics.median(ages) if ages else None,
        "age_p95_s": pct(ages, 0.95) if ages else None, "ages": len(ages),
        "phase": phase, "phase_offset_s": offset if phase == "fixed" else None,
        "cpu_s_per_min": (s1["cpu_s"] - s0["cpu_s"]) / wall * 60,
        "peak_rss_mb": s1["peak_rss_mb"], "rss_mb": s1["rss_mb"], "processes": s1["processes"],
        "load_avg_1m": [min(loads), statistics.median(loads), max(loads)] if loads else None,
        "last_body": body, "body_bytes": len(body),
        "body_gzip_bytes": len(gzip.compress(body, 6)) if body else 0,
    })
    if cycles:  # opskit: its own figures, from the same scrapes
        out.update({
            "cycle_s_median": statistics.median(cycles), "cycle_s_max": max(cycles),
            "aligned_scrapes": sum(1 for a in aligned_flags if a == 1),
            "scrape_period_s_last": periods[-1] if periods else None,
            "age_median_aligned_s": statistics.median(aligned_ages) if aligned_ages else None,
            "age_p95_aligned_s": pct(aligned_ages, 0.95) if aligned_ages else None,
        })


def profile_cycles(bs: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--profile-cycles K``: after the measurement (the exporters stopped), K cycles of an
    in-process exporter (``KafkaSource`` + ``Exporter``, as ``exporter --once`` builds them)
    against the same cluster, the first unprofiled (it starts the clients), the others under
    cProfile on the cycle thread (reads, snapshot, render; threads the reads start are seen
    as waits). Writes the stats to ``out`` and returns the wall time of each cycle. A fresh
    exporter: its status windows hold only these cycles' samples."""
    import cProfile
    import io
    import pstats

    from opskit.adapters.files.config_file import resolve_connection
    from opskit.cli.validate import parse_duration_option
    from opskit.exporter.collector import KafkaSource
    from opskit.exporter.engine import Exporter
    from opskit.exporter.options import ExporterOptions

    interval = parse_duration_option(args.interval, "--interval", 3600.0, minimum=1.0)
    options = ExporterOptions(interval_s=interval, collection_timeout_s=max(30.0, 4 * interval),
                              kafka_timeout_s=30.0, stale_after_s=max(60.0, 4 * interval))
    source = KafkaSource(resolve_connection(bs, None), options)
    engine = Exporter(source, options)
    prof = cProfile.Profile()
    on = [False]
    collect, render = source.collect, engine.render

    def profiled_collect() -> Any:
        if on[0]:
            prof.enable()  # in the cycle thread: cProfile follows the thread that enables it
        return collect()

    def profiled_render(snap: Any) -> Any:
        try:
            return render(snap)
        finally:
            if on[0]:
                prof.disable()

    source.collect = profiled_collect  # type: ignore[method-assign]
    engine.render = profiled_render  # type: ignore[method-assign]
    walls, cpus = [], []
    try:
        for k in range(args.profile_cycles):
            on[0] = k > 0
            t0, c0 = time.time(), time.process_time()
            engine.run_cycle()
            walls.append(time.time() - t0)
            cpus.append(time.process_time() - c0)
            print(f"  profile cycle {k + 1}: {walls[-1]:.1f} s wall, {cpus[-1]:.1f} s CPU, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
            time.sleep(max(0.0, interval - walls[-1]))
    finally:
        source.close()
    prof.dump_stats(str(out))
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(60)
    out.with_suffix(".txt").write_text(text.getvalue())
    return {"cycles_wall_s": walls, "cycles_cpu_s": cpus, "stats": str(out)}


def run_compare(size: str, args: argparse.Namespace) -> dict[str, Any]:
    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.ports import free_port_block
    from opskit.sandbox.processes import pid_alive

    partitions, groups = (int(x) for x in size.lower().split("x"))
    sb = Sandbox(f"bench-exp-{partitions}")
    base = args.port_base
    res: dict[str, Any] = {"size": size, "brokers": args.brokers,
                           "bootstrap_load_1m": os.getloadavg()[0]}
    t_up = time.time()
    st, _ = sb.up(brokers=1, version=args.kafka_version,
                  port=base if base else free_port_block(1), wait_timeout=600)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        if args.brokers > 1:  # broker-only nodes beside the first (broker + controller)
            from opskit.sandbox.scale import add_brokers
            st = add_brokers(sb, args.brokers - 1, wait_timeout=900)
        bs = st.bootstrap
        broker_pids = [n.pid for n in st.nodes if n.pid]
        res["brokers_up_s"] = time.time() - t_up
        print(f"[{size}] cluster: Kafka {args.kafka_version}, {len(st.nodes)} broker(s) at {bs} "
              f"(up in {res['brokers_up_s']:.0f}s)", flush=True)
        t_build = time.time()
        topics = build_cluster(bs, partitions, groups)
        res["setup_s"] = time.time() - t_build
        gone = [n.node_id for n in st.nodes if not pid_alive(n.pid)]
        if gone:
            raise SystemExit(f"broker(s) {gone} exited during the set-up (see their server.log "
                             f"under {sb.root})")
        res["setup_load_1m"] = os.getloadavg()[0]
        res["brokers_after_setup"] = broker_stats(broker_pids)
        probe = Probe(bs)
        ports = {n: base + 1 + i if base else free_port()
                 for i, n in enumerate(("opskit", "kminion", "kafka_exporter", "opskit_fixed",
                                        "opskit_baseline"))}
        procs["opskit"] = start_opskit(bs, ports["opskit"], args.interval, args.exporter_args.split())
        if args.opskit_fixed:  # the same exporter on the fixed schedule, in the same run
            procs["opskit_fixed"] = start_opskit(bs, ports["opskit_fixed"], args.interval,
                                                 args.exporter_args.split() + ["--no-align-to-scrapes"])
        if args.opskit_baseline:  # another checkout's exporter (before/after), same run
            procs["opskit_baseline"] = start_opskit(bs, ports["opskit_baseline"], args.interval,
                                                    args.exporter_args.split(),
                                                    Path(args.opskit_baseline).resolve())
        for name in ("kminion", "kafka_exporter"):
            p = start_competitor(name, bs, ports[name])
            if p is None:
                res[name] = {"name": name, "missing": why_missing(name)}
            else:
                procs[name] = p
        urls = {n: f"http://127.0.0.1:{ports[n]}/metrics" for n in procs}
        wait_http(f"http://127.0.0.1:{ports['opskit']}/ready", 900, procs["opskit"])
        while not ready_text(f"http://127.0.0.1:{ports['opskit']}/ready").startswith("kafka up"):
            time.sleep(1)  # /ready, not /metrics: the only /metrics scrapes are the measured ones
        for n in ("opskit_fixed", "opskit_baseline"):
            if n in procs:
                wait_http(f"http://127.0.0.1:{ports[n]}/ready", 900, procs[n])
        for n, proc in list(procs.items()):
            if n in ("opskit", "opskit_fixed", "opskit_baseline"):
                continue
            try:
                # listening, then one warm-up scrape (they read Kafka on every scrape, and
                # a first one at 2,000+ partitions on a loaded machine takes longer than
                # wait_http's 5 s per try)
                wait_port(ports[n], 300, proc)
                scrape(urls[n], timeout=300)
            except (SystemExit, OSError, urllib.error.URLError) as e:
                # a peer that does not come up is reported, and the others measured
                res[n] = {"name": n, "missing": f"did not answer: {e}"}
                stop_process(procs.pop(n))
                del urls[n]
        probe.start()
        time.sleep(5)
        until = time.time() + args.duration
        outs: dict[str, dict[str, Any]] = {n: {} for n in procs}
        threads = [threading.Thread(target=scrape_loop, args=(n, urls[n], procs[n], probe,
                                                              args.every, until, outs[n], args.phase))
                   for n in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(args.duration + 900)  # a scrape loop ends after --duration and its last scrape
        res["brokers_at_end"] = broker_stats(broker_pids)
        probe.stop()
        truth = true_lags(topics, groups)
        for n, o in outs.items():
            got = lag_table(o.pop("last_body", b""))
            o["lag_vs_truth"] = {"compared": len(truth),
                                 "equal": sum(1 for k, v in truth.items() if got.get(k) == v)}
            res[n] = o
        if args.profile_cycles:
            for p in procs.values():
                stop_process(p)
            res["profile"] = profile_cycles(bs, args, Path(f"/tmp/bench-exporter-{size}.prof"))
    finally:
        for p in procs.values():
            stop_process(p)
        sb.down()
    return res


def print_compare(res: dict[str, Any]) -> None:
    names = [n for n in ("opskit", "kminion", "kafka_exporter", "opskit_fixed", "opskit_baseline")
             if "scrapes" in res.get(n, {})]

    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    print(f"\n== {res['size']} (partitions x groups) ==")
    print(f"{'':16}" + "".join(f"{n:>16}" for n in names))
    rows = (("scrape p50 ms", "p50_ms", ".1f"), ("scrape p99 ms", "p99_ms", ".1f"),
            ("age median s", "age_median_s", ".2f"), ("age p95 s", "age_p95_s", ".2f"),
            ("CPU s / min", "cpu_s_per_min", ".2f"), ("peak RSS MB", "peak_rss_mb", ".0f"))
    for label, key, fmt in rows:
        print(f"{label:16}" + "".join(f"{f(res[n].get(key), fmt):>16}" for n in names))
    print(f"{'lag = truth':16}" + "".join(
        f"{res[n]['lag_vs_truth']['equal']:>9}/{res[n]['lag_vs_truth']['compared']:<6}" for n in names))
    print(f"{'scrapes (fail)':16}" + "".join(
        f"{res[n]['scrapes']:>12} ({res[n]['failed_scrapes']})" for n in names))
    print(f"{'load 1m min/med/max':20}" + "".join(
        f"{'/'.join(format(x, '.0f') for x in res[n]['load_avg_1m'] or [])!s:>16}" for n in names))
    o = res["opskit"]
    print(f"opskit cycle (its own duration metric): median {f(o.get('cycle_s_median'), '.1f')} s, "
          f"max {f(o.get('cycle_s_max'), '.1f')} s")
    print(f"phase {o.get('phase')}; opskit schedule aligned at {o.get('aligned_scrapes')} of "
          f"{o.get('scrapes')} scrapes (estimated period {f(o.get('scrape_period_s_last'), '.2f')} s); "
          f"age over those: median {f(o.get('age_median_aligned_s'), '.2f')} s, "
          f"p95 {f(o.get('age_p95_aligned_s'), '.2f')} s")
    for peer in names[1:]:
        p = res[peer]
        ratios = []
        for label, key in (("age", "age_median_s"), ("CPU/min", "cpu_s_per_min"),
                           ("p99", "p99_ms"), ("peak RSS", "peak_rss_mb")):
            a, b = o.get(key), p.get(key)
            ratios.append(f"{label} {a / b:.2f}x" if a is not None and b else f"{label} -")
        print(f"opskit / {peer}: " + ", ".join(ratios))
    print(f"scraped text (opskit): {o.get('body_bytes', 0) / 1e6:.1f} MB, "
          f"{o.get('body_gzip_bytes', 0) / 1e6:.2f} MB gzip -6")
    if "setup_s" in res:
        print(f"set-up: {res['brokers']} broker(s) up in {res['brokers_up_s']:.0f} s, topics, records "
              f"and groups in {res['setup_s']:.0f} s (load {res['setup_load_1m']:.1f} at its end)")
    for when in ("brokers_after_setup", "brokers_at_end"):
        print(f"{when}: " + "; ".join(
            "gone" if b.get("gone") else
            f"{b['fds']:.0f} fds, {b['maps']:.0f} maps, RSS {b['rss_mb']:.0f} MB (peak {b['peak_rss_mb']:.0f})"
            for b in res.get(when, [])))
    for n in ("kminion", "kafka_exporter"):
        if "missing" in res.get(n, {}):
            print(f"{n}: not measured: {res[n]['missing']}")


def run_soak(bs: str, topics: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bs})
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    proc = start_opskit(bs, port, args.interval, args.exporter_args.split())
    samples: list[dict[str, float]] = []
    deleted: list[str] = []
    stale_found: list[str] = []
    existing = {g.group_id for g in admin.list_consumer_groups().result(60).valid}
    live = {g for g in existing if g.startswith("bench-group-")}
    next_new = max([int(g.rsplit("-", 1)[1]) for g in live] + [args.groups - 1]) + 1
    first_new = next_new
    scrape_lat: list[float] = []
    try:
        wait_http(f"http://127.0.0.1:{port}/ready", 600, proc)
        while self_metric(url, "opskit_kafka_up") != 1.0:
            time.sleep(1)
        t0 = time.time()
        cpu0 = proc_stats(proc.pid)["cpu_s"]
        cycles0 = self_metric(url, "opskit_exporter_collections_total") or 0.0
        k = 0
        while time.time() - t0 < args.soak:
            # churn: one new group, one deleted group, every churn period
            gid = group_name(next_new)
            t = topics[next_new % len(topics)]
            f = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                gid, [CkTP(t, part, 1) for part in range(PER_TOPIC)])])
            for x in f.values():
                x.result(60)
            live.add(gid)
            next_new += 1
            victim = min(live)
            try:
                for x in admin.delete_consumer_groups([victim]).values():
                    x.result(60)
            except Exception as e:
                if "GROUP_ID_NOT_FOUND" not in str(e):
                    raise
            live.discard(victim)
            deleted.append(victim)
            time.sleep(args.churn)
            dt, body = scrape(url)
            scrape_lat.append(dt)
            text = body.decode(errors="replace")
            # a group deleted before the last finished cycle must be gone
            for g in deleted[:-2]:
                if f'consumergroup="{g}"' in text:
                    stale_found.append(g)
            st = proc_stats(proc.pid)
            groups_served = len(set(re.findall(r'kafka_consumergroup_members\{consumergroup="([^"]+)"', text)))
            samples.append({"t": time.time() - t0, **st, "groups_served": groups_served,
                            "load1": os.getloadavg()[0]})
            k += 1
            if k % 6 == 0:
                print(f"  soak t={samples[-1]['t']:.0f}s rss={st['rss_mb']:.0f}MB "
                      f"pss={st['pss_mb']:.0f}MB groups={groups_served} "
                      f"load={samples[-1]['load1']:.1f}", flush=True)
        cycles = (self_metric(url, "opskit_exporter_collections_total") or 0.0) - cycles0
        cpu_per_cycle = (proc_stats(proc.pid)["cpu_s"] - cpu0) / cycles if cycles else None
    finally:
        stop_process(proc)
    def med(key: str, lo: float, hi: float) -> float | None:
        xs = [s[key] for s in samples if lo <= s["t"] < hi]
        return statistics.median(xs) if xs else None

    quarter = args.soak / 4
    # steady state: after the status window has filled (default 10 min) plus a minute
    warm = 660.0
    steady = [s for s in samples if s["t"] >= warm]
    return {"seconds": args.soak, "groups_created": next_new - first_new, "groups_deleted": len(deleted),
            "rss_mb_by_quarter": [med("rss_mb", q * quarter, (q + 1) * quarter) for q in range(4)],
            "pss_mb_by_quarter": [med("pss_mb", q * quarter, (q + 1) * quarter) for q in range(4)],
            "peak_rss_mb": max(s["peak_rss_mb"] for s in samples) if samples else None,
            "steady_after_s": warm,
            "pss_mb_steady_median": statistics.median(s["pss_mb"] for s in steady) if steady else None,
            "pss_mb_steady_max": max(s["pss_mb"] for s in steady) if steady else None,
            "rss_mb_steady_median": statistics.median(s["rss_mb"] for s in steady) if steady else None,
            "cpu_s_per_cycle": cpu_per_cycle,
            "load_avg_1m_median": statistics.median(s["load1"] for s in samples) if samples else None,
            "load_avg_1m_max": max(s["load1"] for s in samples) if samples else None,
            "stale_series_of_deleted_groups": sorted(set(stale_found)),
            "scrape_p99_ms": pct(scrape_lat, 0.99) * 1000 if scrape_lat else None,
            "samples": samples}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--groups", type=int, default=500)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--competitor-scrapes", type=int, default=10)
    ap.add_argument("--spacing", type=float, default=0.1, help="seconds between scrapes")
    ap.add_argument("--interval", default="15s",
                    help="the exporter's collection interval (also with --compare)")
    ap.add_argument("--soak", type=int, default=0, help="soak for this many seconds instead")
    ap.add_argument("--churn", type=float, default=10.0, help="soak: seconds between churn steps")
    ap.add_argument("--kafka-version", default="3.7")
    ap.add_argument("--json", help="write the report to this file")
    ap.add_argument("--bootstrap", help="use this already-built cluster (same --partitions/--groups)")
    ap.add_argument("--exporter-args", default="", help="extra flags for opskit exporter, e.g. '--status-window 2m'")
    ap.add_argument("--compare", help="sizes PxG,... : the three exporters side by side, one run per size")
    ap.add_argument("--duration", type=float, default=300.0, help="--compare: seconds of scraping per size")
    ap.add_argument("--every", type=float, default=15.0, help="--compare: seconds between scrapes")
    ap.add_argument("--profile-cycles", type=int, default=0, metavar="K",
                    help="--compare: after the measurement, K in-process cycles against the same "
                         "cluster, all but the first under cProfile (/tmp/bench-exporter-SIZE.prof)")
    ap.add_argument("--brokers", type=int, default=1,
                    help="--compare: brokers in the sandbox (the partitions spread over them, RF 1); "
                         "one broker holds at most ~19,000 partitions under ulimit -n 20,000")
    ap.add_argument("--opskit-fixed", action="store_true",
                    help="--compare: also run opskit with --no-align-to-scrapes in the same run")
    ap.add_argument("--opskit-baseline", metavar="TREE",
                    help="--compare: also run the opskit exporter of the checkout at TREE (e.g. a "
                         "`git archive` of main) in the same run, scraped the same way: before/after")
    ap.add_argument("--port-base", type=int, default=0,
                    help="--compare: broker at this port, the exporters at the next five "
                         "(the sandbox's controller at +1000); default: free ports")
    ap.add_argument("--peers", default="all",
                    help="the peers to measure beside opskit: all (default), none, or a comma "
                         "list of kminion, kafka_exporter")
    ap.add_argument("--phase", choices=("random", "fixed"), default="random",
                    help="--compare: a new random phase every period, or one random offset per "
                         "exporter for the whole run (as Prometheus)")
    args = ap.parse_args()
    if args.brokers < 1:
        ap.error("--brokers must be 1 or more")
    peers = {"all": set(PEER_NAMES), "none": set()}.get(
        args.peers, {n.strip() for n in args.peers.split(",") if n.strip()})
    if peers - set(PEER_NAMES):
        ap.error(f"--peers: unknown {', '.join(sorted(peers - set(PEER_NAMES)))} "
                 f"(all, none, or of {', '.join(PEER_NAMES)})")
    PEERS.clear()
    PEERS.update(peers)

    os.environ.setdefault("OPSKIT_STATE", tempfile.mkdtemp(prefix="opskit-bench-exporter-"))
    os.environ.setdefault("OPSKIT_SANDBOX_HEAP", "3g")
    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.ports import free_port_block

    if args.compare:
        results = []
        for size in args.compare.split(","):
            r = run_compare(size, args)
            print_compare(r)
            results.append(r)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        return 0
    if args.bootstrap:
        sb = None
        bs = args.bootstrap
        topics = [f"bench_t{i:03d}" for i in range(max(1, args.partitions // PER_TOPIC))]
    else:
        sb = Sandbox("bench-exporter")
        st, _ = sb.up(brokers=1, version=args.kafka_version, port=free_port_block(1), wait_timeout=300)
        bs = st.bootstrap
    try:
        if sb is not None:
            print(f"cluster: Kafka {args.kafka_version} at {bs}", flush=True)
            topics = build_cluster(bs, args.partitions, args.groups)
        print(f"  {len(topics) * PER_TOPIC} partitions, {args.groups} groups x {PER_TOPIC} "
              f"committed partitions each", flush=True)
        if args.soak:
            rep = run_soak(bs, topics, args)
            summary = {k: v for k, v in rep.items() if k != "samples"}
            print(json.dumps(summary, indent=2))
        else:
            rep = run_bench(bs, topics, args)
            o = rep["opskit"]
            print(f"opskit exporter: scrape p50 {o['p50_ms']:.1f} ms, p99 {o['p99_ms']:.1f} ms "
                  f"(max {o['max_ms']:.1f}) over {o['scrapes']} scrapes; {o['series']} series; "
                  f"cycle median {o['cycle_s_median']} s (max {o['cycle_s_max']}); "
                  f"CPU {o['cpu_s_per_cycle']} s/cycle; RSS {o['rss_mb']:.0f} MB "
                  f"(peak {o['peak_rss_mb']:.0f} MB, PSS {o['pss_mb']:.0f} MB, "
                  f"{o['processes']:.0f} processes); errors {o['errors']}; "
                  f"lag vs truth: {o['lag_vs_truth']['mismatches']} of "
                  f"{o['lag_vs_truth']['compared']} differ")
            for name in ("kafka_exporter", "kminion"):
                c = rep[name]
                if "missing" in c:
                    print(f"{name}: not measured: {c['missing']}")
                    continue
                print(f"{name}: scrape p50 {c['p50_ms']:.1f} ms, p99 {c['p99_ms']:.1f} ms; "
                      f"RSS {c['rss_mb']:.0f} MB; CPU {c['cpu_s']:.1f} s over {c['scrapes']} scrapes; "
                      f"p99 ratio {c['p99_ms'] / o['p99_ms']:.1f}x, RSS ratio "
                      f"{c['rss_mb'] / o['rss_mb']:.2f}x; lag agreement {c['lag_agreement']}")
            for v in rep.values():
                v.pop("last_body", None)
            summary = rep
        if args.json:
            Path(args.json).write_text(json.dumps(rep, indent=2, default=str))
    finally:
        if sb is not None:
            sb.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
