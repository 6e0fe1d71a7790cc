"""``--command-config FILE``: the client properties file a team already uses with Kafka's
tools, written the way Kafka's documentation writes it, used by opskit and by
``kafka-consumer-groups.sh --command-config`` on the same secured cluster (SASL_PLAINTEXT
and SASL_SSL; PLAIN and SCRAM): both see the same group, offsets and lag. The password
read from the file never appears in opskit's output, with ``--debug`` either."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import commit, create_topic, parse_describe, produce, run_cli


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_same_file_same_numbers_as_kafka_tool(any_secured_kafka, mechanism: str,
                                              tmp_path: Path, uniq: str) -> None:
    c = any_secured_kafka
    admin = c.conn().to_librdkafka()
    topic, group = f"cc_{uniq}", f"cc-{uniq}"
    create_topic(admin, topic, 3)
    produce(admin, topic, {0: 30, 1: 20, 2: 5})
    commit(admin, group, {(topic, 0): 10, (topic, 1): 20, (topic, 2): 1})
    props = c.command_config(tmp_path / "client.properties", "admin", mechanism)
    text = props.read_text()
    assert "sasl.jaas.config=org.apache.kafka.common.security." in text
    assert ("ssl.truststore.type=PEM" in text) == (c.security == "sasl_ssl")

    ours = run_cli("lag", "--group", group, "-o", "json", "-b", c.bootstrap,
                   "--command-config", str(props))
    dist = c.dist()
    proc = dist.run_tool(dist.consumer_groups_class, "--bootstrap-server", c.bootstrap,
                         "--command-config", str(props), "--describe", "--group", group,
                         "--timeout", "120000")  # the JVM's logins under a loaded machine
    assert proc.returncode == 0, proc.stderr
    assert ours.code == 0, ours.err
    theirs = parse_describe(proc.stdout)
    mine = {(g["group"], p["topic"], p["partition"]): p
            for g in ours.json()["groups"] for p in g["partitions"]}
    assert set(theirs) == set(mine) == {(group, topic, p) for p in range(3)}, (
        proc.stdout + proc.stderr)
    for key, row in theirs.items():
        assert mine[key]["committed_offset"] == int(str(row["CURRENT-OFFSET"])), key
        assert mine[key]["log_end_offset"] == int(str(row["LOG-END-OFFSET"])), key
        assert mine[key]["lag"] == int(str(row["LAG"])), key
    assert sum(p["lag"] for p in mine.values()) == 20 + 0 + 4

    # the password from the file is masked everywhere, with --debug's client logs too
    secret = c.password("admin")
    dbg = run_cli("--debug", "health", "-b", c.bootstrap, "--command-config", str(props))
    assert secret not in ours.out + ours.err + dbg.out + dbg.err
    assert dbg.code in (0, 1, 2), dbg.err


def test_bootstrap_from_file_and_context_import(kafka_sasl_ssl, tmp_path: Path,
                                                uniq: str) -> None:
    c = kafka_sasl_ssl
    props = c.command_config(tmp_path / "admin.properties", "admin", "SCRAM-SHA-256")
    with props.open("a") as f:
        f.write(f"bootstrap.servers={c.bootstrap}\nrequest.timeout.ms=20000\n")
    r = run_cli("health", "-o", "json", "--command-config", str(props))
    assert r.code in (0, 1, 2), r.err
    assert r.err.splitlines()[0] == (f"opskit: warning: --command-config {props}: not used by "
                                     "opskit: request.timeout.ms")

    name = f"imported-{uniq}"
    r = run_cli("context", "import", str(props), "--name", name)
    assert r.code == 0, r.err
    shown = run_cli("context", "show", name, "-o", "json")
    assert shown.code == 0, shown.err
    data = shown.json()
    assert (data["security_protocol"], data["sasl_mechanism"], data["username"]) == (
        "SASL_SSL", "SCRAM-SHA-256", "admin")
    assert data["password"] == "********" and data["command_config"] == str(props)
    assert c.password("admin") not in shown.out + shown.err
    config_text = Path(__import__("os").environ["OPSKIT_CONFIG"]).read_text()
    assert c.password("admin") not in config_text  # the password stays in its file
    r = run_cli("lag", "--all-groups", "--context", name, "-o", "json")
    assert r.code in (0, 1, 2), r.err
    assert run_cli("context", "delete", name).code == 0

    # a wrong password in the file: Kafka's refusal in one line (exit 9), not the password
    bad = tmp_path / "bad.properties"
    bad.write_text(props.read_text().replace(c.password("admin"), "not-the-password-x1"))
    r = run_cli("health", "--command-config", str(bad), "--timeout", "5")
    assert r.code == 9, r.err
    assert "not-the-password-x1" not in r.out + r.err
