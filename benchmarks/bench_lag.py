"""Benchmark: `opskit lag --all-groups -o json` vs `kafka-consumer-groups.sh --describe --all-groups`.

One real Kafka broker (sandbox), N partitions across topics of 100 partitions,
G consumer groups each committed on one topic (90 of its 100 partitions, so some
partitions have no commit). Both commands run as fresh processes against the
same cluster, alternately, several times; the medians and their ratio are
printed, the numbers are compared row by row, and the broker's own request log
counts the requests each client sent.

    python benchmarks/bench_lag.py [--partitions 2000] [--groups 200] [--runs 5] [--kafka-version 3.7] [--no-time]
                                   [--security plaintext|sasl_plaintext|sasl_ssl] [--mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512]

With ``--security`` the sandbox is secured (see ``opskit/sandbox/security.py``) and
both clients log in as its admin with ``--mechanism``: opskit through a context
(password file), the tool through ``--command-config``. SASL logins are not in
the broker's request log; they are counted from the broker's authenticator log
(one SaslHandshake and one SaslAuthenticate per login with PLAIN, two with SCRAM).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opskit.core.connection import ConnectionConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
             9: "OffsetFetch", 10: "FindCoordinator", 15: "DescribeGroups", 16: "ListGroups",
             18: "ApiVersions", 32: "DescribeConfigs", 60: "DescribeCluster", 71: "ConsumerGroupDescribe"}
#: what a lag report of all groups needs at least, on one broker: Metadata, ListGroups,
#: FindCoordinator (v4 takes many groups), DescribeGroups (batched), OffsetFetch (v8 takes
#: many groups), ListOffsets x2 (earliest, latest). Lag in time adds one Fetch per leader
#: (record timestamps) and one DescribeConfigs (retention).
MINIMUM = {"Metadata": 1, "ListGroups": 1, "FindCoordinator": 1, "DescribeGroups": 1,
           "OffsetFetch": 1, "ListOffsets": 2}
MINIMUM_TIME = {"Fetch": 1, "DescribeConfigs": 1}


def count_requests(log: Path) -> dict[str, Counter[str]]:
    by_client: dict[str, Counter[str]] = {}
    if not log.exists():
        return by_client
    for line in log.read_text(errors="replace").splitlines():
        m_key = re.search(r'"requestApiKey":(\d+)', line)
        m_cli = re.search(r'"clientId":"([^"]*)"', line)
        if not (m_key and m_cli):
            continue
        api = API_NAMES.get(int(m_key.group(1)), f"api{m_key.group(1)}")
        by_client.setdefault(m_cli.group(1), Counter())[api] += 1
    return by_client


def count_logins(log: Path) -> int:
    """SaslHandshake requests the broker handled (its authenticator's DEBUG line; one per
    login, i.e. per connection of a SASL client)."""
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text(errors="replace").splitlines()
               if line.startswith("Handling Kafka request SASL_HANDSHAKE"))


def tool_security_args(path: Path, c: ConnectionConfig) -> list[str]:
    """``--command-config`` for Kafka's tools logging in as ``c`` says (file 0600)."""
    if c.security_protocol == "PLAINTEXT":
        return []
    mech = c.sasl_mechanism
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    lines = [f"security.protocol={c.security_protocol}", f"sasl.mechanism={mech}",
             f'sasl.jaas.config={module} required username="{c.username}" password="{c.password}";']
    if c.ca_file:
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={c.ca_file}"]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    return ["--command-config", str(path)]


def set_request_logger(dist: object, bootstrap: str, level: str,
                       security: list[str] | None = None) -> bool:
    """Set broker 0's ``kafka.request.logger`` level at run time (Kafka's broker-loggers
    dynamic config, through its own kafka-configs tool); False when the broker refuses."""
    proc = dist.run_tool(  # type: ignore[attr-defined]
        "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *(security or []), "--alter",
        "--entity-type", "broker-loggers", "--entity-name", "0",
        "--add-config", f"kafka.request.logger={level}", timeout=120)
    if proc.returncode != 0:
        print(f"note: the broker's request logger stays on in the timed rounds (setting it "
              f"to {level} failed: {proc.stderr.strip().splitlines()[-1:]})", flush=True)
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kafka-version", default="3.7")
    ap.add_argument("--no-time", action="store_true",
                    help="run opskit with --no-time (lag in messages only, like the tool)")
    ap.add_argument("--verbose", action="store_true", help="print every run's time")
    ap.add_argument("--log-every-run", action="store_true",
                    help="keep the broker's request log on in the timed rounds too (it slows "
                         "the broker; by default requests are counted in the warm-up round)")
    ap.add_argument("--security", default="plaintext",
                    choices=("plaintext", "sasl_plaintext", "sasl_ssl"),
                    help="the sandbox's client listener; both clients log in as its admin")
    ap.add_argument("--mechanism", default="PLAIN",
                    choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    ap.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                    help="after the measurements keep the cluster up this long (for profiling)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="opskit-bench-"))
    os.environ.setdefault("OPSKIT_STATE", str(work / "state"))
    os.environ["OPSKIT_CONFIG"] = str(work / "config.yaml")  # the bench's own contexts
    os.environ["OPSKIT_SANDBOX_REQUEST_LOG"] = "1"
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient, NewTopic

    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.dist import ensure_kafka_dist
    from opskit.sandbox.ports import free_port_block
    from opskit.sandbox.security import write_contexts
    from tests.helpers import parse_describe

    sb = Sandbox("bench-lag")
    st, _ = sb.up(brokers=1, version=args.kafka_version, port=free_port_block(1),
                  security=args.security)
    bs = st.bootstrap
    dist = ensure_kafka_dist(st.version)
    reqlog = st.nodes[0].dir / "requests.log"
    conn = sb.connection("admin", args.mechanism)
    client_conf = conn.to_librdkafka()
    tool_security = tool_security_args(work / "tool.properties", conn)
    if conn.password is not None:
        write_contexts(sb.name, bs, sb.security(st), args.mechanism)
        connect_args = ["--context", "sandbox-bench-lag-admin"]
    else:
        connect_args = ["-b", bs]
    try:
        admin = AdminClient(client_conf)
        per_topic = 100
        n_topics = max(1, args.partitions // per_topic)
        topics = [f"bench_t{i:03d}" for i in range(n_topics)]
        for f in admin.create_topics([NewTopic(t, per_topic, 1) for t in topics]).values():
            f.result(120)
        time.sleep(2)
        p = Producer({**client_conf, "linger.ms": 20})
        for t in topics:
            for part in range(per_topic):
                for k in range(5):
                    p.produce(t, value=b"x" * 100, partition=part)
            p.poll(0)
        # every record delivered before the measurements (a loaded machine can take minutes
        # over TLS): a late delivery would change log ends between the two commands' reads
        deadline = time.time() + 900
        while p.flush(30) > 0:
            if time.time() > deadline:
                print("the set-up records were not all delivered in 15 minutes")
                return 1
        # commit every group; a fresh __consumer_offsets answers per-partition errors
        # (COORDINATOR_LOAD_IN_PROGRESS, ...) inside a successful future: check and retry
        todo = list(range(args.groups))
        for _attempt in range(30):
            futs = {}
            for g in todo:
                t = topics[g % n_topics]
                tps = [CkTP(t, part, (g + part) % 6) for part in range(90)]
                futs[g] = next(iter(admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(f"bench-group-{g:03d}", tps)]).values()))
            failed = []
            for g, f in futs.items():
                try:
                    res = f.result(60)
                    if any(tp.error is not None for tp in res.topic_partitions or []):
                        failed.append(g)
                except Exception:  # noqa: BLE001 - retried
                    failed.append(g)
            todo = failed
            if not todo:
                break
            time.sleep(1)
        if todo:
            print(f"{len(todo)} groups could not be committed")
            return 1
        # wait until every group is listed (a fresh __consumer_offsets may still be loading)
        deadline = time.time() + 120
        while True:
            listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
            if sum(1 for g in listed if g.startswith("bench-group-")) >= args.groups:
                break
            if time.time() > deadline:
                print(f"only {len(listed)} of {args.groups} groups listed after 120 s")
                return 1
            time.sleep(1)
        sec = "PLAINTEXT" if conn.password is None else \
            f"{conn.security_protocol} ({args.mechanism}, as admin)"
        print(f"cluster: Kafka {st.version}, {sec}, {n_topics * per_topic} partitions, "
              f"{args.groups} groups, {args.groups * 90} committed group-partitions", flush=True)
        # the set-up clients go before the timing: an idle librdkafka producer and admin
        # client keep threads that wake up, on a 2-core machine enough to slow a 0.4 s
        # command by up to 0.1 s
        del p, admin
        gc.collect()

        opskit_cmd = [sys.executable, "-m", "opskit.cli.main", "lag", "--all-groups", "-o", "json",
                      *connect_args, "--timeout", "60"] + (["--no-time"] if args.no_time else [])
        tool_cmd = dist.java_cmd(dist.consumer_groups_class, "--bootstrap-server", bs,
                                 *tool_security, "--describe", "--all-groups")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        # an installed opskit runs from compiled bytecode (pip writes it); some shells set
        # PYTHONDONTWRITEBYTECODE, which would make every run recompile opskit from source.
        # The warm-up round writes the cache; the measured rounds use it.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        times: dict[str, list[float]] = {"opskit": [], "kafka-consumer-groups": []}
        requests: dict[str, Counter[str]] = {}
        logins: dict[str, int] = {}
        outputs: dict[str, str] = {}
        incomplete = 0
        for i in range(args.runs + 1):  # first round is a warm-up
            if i == 1 and not args.log_every_run:
                # requests are counted in the warm-up round; the timed rounds run without
                # the broker's request log, which formats every request and answer it
                # completes (for a Fetch or ListOffsets of 2,000 partitions, a large string)
                set_request_logger(dist, bs, "WARN", tool_security)
            for name, cmd in (("opskit", opskit_cmd), ("kafka-consumer-groups", tool_cmd)):
                os.truncate(reqlog, 0) if reqlog.exists() else None
                # output to a file, as `... > out.json`: the clock stops when the command
                # exits, not after this script has read and decoded its output (12 MB of
                # JSON for opskit, about 20 ms to decode, would count against it otherwise)
                with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
                    t0 = time.perf_counter()
                    child = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
                    # a blocking wait: Popen.wait(timeout=...) polls, sleeping up to 50 ms
                    # between looks, which would round the times up; a timer kills a hang
                    watchdog = threading.Timer(900, child.kill)
                    watchdog.start()
                    rc = child.wait()
                    dt = time.perf_counter() - t0
                    watchdog.cancel()
                    out.seek(0)
                    err.seek(0)
                    proc = subprocess.CompletedProcess(cmd, rc, out.read().decode(),
                                                       err.read().decode())
                if proc.returncode not in (0, 1, 2):
                    print(f"{name} failed rc={proc.returncode}: {proc.stderr[-500:]}")
                    return 1
                time.sleep(0.5)
                counts = count_requests(reqlog)
                client = "opskit" if name == "opskit" else next(
                    (c for c in counts if c.startswith("adminclient")), "")
                if name == "kafka-consumer-groups":
                    seen = {k[0] for k in parse_describe(proc.stdout)}
                    if len(seen) != args.groups:
                        print(f"warning: run {i}: kafka-consumer-groups described {len(seen)} of "
                              f"{args.groups} groups (rc {proc.returncode}): "
                              f"{proc.stderr.strip().splitlines()[-1:] }", flush=True)
                        incomplete += 1
                if i == 0 or args.log_every_run:
                    requests[name] = counts.get(client, Counter())
                    logins[name] = count_logins(reqlog)
                if i == 0:
                    outputs[name] = proc.stdout
                    if os.environ.get("BENCH_LAG_SAVE"):
                        Path(os.environ["BENCH_LAG_SAVE"], f"{name}.out").write_text(proc.stdout)
                        Path(os.environ["BENCH_LAG_SAVE"], f"{name}.err").write_text(proc.stderr)
                    continue
                times[name].append(dt)
                if args.verbose:
                    print(f"  run {i}: {name} {dt:.3f} s", flush=True)

        # identical numbers, row by row
        theirs = parse_describe(outputs["kafka-consumer-groups"])
        ours = json.loads(outputs["opskit"])
        by_key = {(g["group"], p["topic"], p["partition"]): p for g in ours["groups"] for p in g["partitions"]}
        mismatches = 0
        for key, row in theirs.items():
            p = by_key.get(key)
            want = (None if row["CURRENT-OFFSET"] is None else int(row["CURRENT-OFFSET"]),
                    int(str(row["LOG-END-OFFSET"])),
                    None if row["LAG"] is None else int(row["LAG"]))
            if p is None or (p["committed_offset"], p["log_end_offset"], p["lag"]) != want:
                mismatches += 1
        print(f"rows compared: {len(theirs)}, mismatches: {mismatches}")

        med = {k: statistics.median(v) for k, v in times.items()}
        per_login = 1 if args.mechanism == "PLAIN" else 2
        print(f"{'command':<24}{'median s':>10}{'min s':>10}{'max s':>10}   requests sent (warm-up round, from the broker's request log)")
        for name, v in times.items():
            req = requests.get(name, Counter())
            total = sum(c for api, c in req.items() if api != "ApiVersions")
            detail = ", ".join(f"{api} {c}" for api, c in sorted(req.items()))
            n_login = logins.get(name, 0)
            login = "" if not n_login else (
                f"; plus {n_login} SASL login(s) = {n_login * (1 + per_login)} requests "
                f"(SaslHandshake + {per_login} SaslAuthenticate each)")
            print(f"{name:<24}{med[name]:>10.2f}{min(v):>10.2f}{max(v):>10.2f}   {total} ({detail}){login}")
        print(f"minimum needed: {sum(MINIMUM.values())} ({', '.join(f'{k} {v}' for k, v in MINIMUM.items())})"
              f", plus {sum(MINIMUM_TIME.values())} for lag in time "
              f"({', '.join(f'{k} {v}' for k, v in MINIMUM_TIME.items())}); ApiVersions not counted")
        if incomplete:
            print(f"kafka-consumer-groups runs with missing groups: {incomplete}")
        ratio = med["kafka-consumer-groups"] / med["opskit"]
        print(f"ratio kafka-consumer-groups / opskit (wall clock, median of {args.runs}): {ratio:.1f}x")
        if args.hold:
            print(f"holding the cluster at {bs} for {args.hold:.0f} s", flush=True)
            time.sleep(args.hold)
        return 0 if mismatches == 0 else 1
    finally:
        sb.down()


if __name__ == "__main__":
    sys.exit(main())
