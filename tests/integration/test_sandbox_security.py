"""The secured sandbox (``sandbox up --security``): logins, the authorizer, secrets on disk,
contexts, and HIP-30 traffic on it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from opskit.cli import exits
from opskit.sandbox.ports import free_port_block
from opskit.sandbox.security import HIP30_PRINCIPALS, MECHANISMS, PRINCIPALS
from tests.helpers import commit, run_cli


def _topics_seen(conf: dict[str, object]) -> tuple[int, set[str]]:
    md = AdminClient({**conf, "log_level": 0}).list_topics(timeout=10)
    return len(md.brokers), set(md.topics)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_principal_logs_in_with_every_mechanism(any_secured_kafka, mechanism):
    for user in PRINCIPALS:
        brokers, _ = _topics_seen(any_secured_kafka.conn(user, mechanism).to_librdkafka())
        assert brokers == 1, user


def test_wrong_password_is_refused(kafka_sasl_ssl):
    conf = kafka_sasl_ssl.conn("monitor", "SCRAM-SHA-512").to_librdkafka()
    conf.update({"sasl.password": "not-the-password", "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        AdminClient({**conf, "log_level": 0}).list_topics(timeout=3)


def test_authorizer_denies_without_acls_and_admin_is_super_user(kafka_sasl_ssl, uniq):
    topic = f"sec_{uniq}"
    admin = kafka_sasl_ssl.admin()
    admin.create_topics([(topic, 2, 1, {})])
    assert topic in _topics_seen(kafka_sasl_ssl.conn().to_librdkafka())[1]
    for user in ("monitor", *HIP30_PRINCIPALS):
        # allow.everyone.if.no.acl.found=false: no ACL, no topic
        assert topic not in _topics_seen(kafka_sasl_ssl.conn(user).to_librdkafka())[1], user


def test_secrets_on_disk_are_private_and_the_config_holds_no_password(kafka_sasl_ssl):
    from opskit.paths import config_file

    sec = kafka_sasl_ssl.sandbox.security(kafka_sasl_ssl.state)
    assert stat.S_IMODE(sec.dir.stat().st_mode) == 0o700
    private = [sec.password_file(u) for u in PRINCIPALS] + [sec.keystore_file, sec.dir / "ca.key"]
    private += [n.config_path for n in kafka_sasl_ssl.state.nodes]
    for f in private:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    passwords = [kafka_sasl_ssl.password(u) for u in PRINCIPALS]
    assert len(set(passwords)) == len(passwords) and all(len(p) == 32 for p in passwords)
    cfg_text = config_file().read_text()
    assert kafka_sasl_ssl.admin_context in cfg_text and "password_file" in cfg_text
    for pw in passwords:
        assert pw not in cfg_text
    # nor on any sandbox process's command line (the format step used an argument file)
    for n in kafka_sasl_ssl.state.nodes:
        cmdline = Path(f"/proc/{n.pid}/cmdline").read_bytes().decode(errors="replace")
        assert not any(pw in cmdline for pw in passwords)
        assert not (n.dir / "format.args").exists()


def test_contexts_work_for_admin_and_monitor(kafka_sasl_ssl):
    shown = run_cli("context", "show", kafka_sasl_ssl.admin_context, "-o", "json")
    assert shown.code == 0, shown.err
    data = shown.json()
    assert kafka_sasl_ssl.password("admin") not in shown.out
    assert data["security_protocol"] == "SASL_SSL" and data["username"] == "admin"
    r = run_cli("lag", "--all-groups", *kafka_sasl_ssl.cli_args("admin"), "-o", "json")
    assert r.code == 0, r.err
    # the monitor logs in (no ACL yet, so it sees no group: not an authentication failure)
    r = run_cli("lag", "--all-groups", *kafka_sasl_ssl.cli_args("monitor"), "-o", "json")
    assert r.code != exits.AUTH and "authentication" not in r.err, r.err


def test_load_runs_on_a_secured_sandbox(kafka_sasl_plaintext):
    args = kafka_sasl_plaintext.cli_args("admin")
    assert run_cli("topics", "apply", *args, "--execute").code == 0
    # the group coordinator ready first (a fresh cluster creates __consumer_offsets on
    # the first group's request), so the load's consumers join within its duration
    commit(kafka_sasl_plaintext.conn().to_librdkafka(), "warm-up", {("dead_letter", 0): 0})
    r = run_cli("sandbox", "load", "--name", kafka_sasl_plaintext.sandbox.name,
                "--duration", "12", "--rate", "100", "--seed", "1")
    assert r.code == 0, r.out + r.err
    assert "produced: {" in r.out and "'llm_usage': " in r.out
    assert "consumed: {}" not in r.out, r.out  # the consumer groups logged in and read
    lag = run_cli("lag", "--group", "analytics-ingest", *args, "-o", "json")
    assert lag.code == 0, lag.err


def test_security_mode_is_kept_and_bad_values_are_refused(uniq):
    bad = run_cli("sandbox", "up", "--name", f"bad-{uniq}", "--security", "kerberos")
    assert bad.code == exits.USAGE and "--security" in bad.err
    mech = run_cli("sandbox", "up", "--name", f"bad-{uniq}", "--security", "sasl_ssl",
                   "--sasl-mechanism", "GSSAPI")
    assert mech.code == exits.USAGE and "--sasl-mechanism" in mech.err
    assert run_cli("sandbox", "status", "--name", f"bad-{uniq}").code == exits.NOT_FOUND


def test_three_nodes_on_kafka_4_with_tls_between_brokers(uniq, tmp_path):
    """Three nodes replicate over the SASL_SSL listener (inter-broker as admin)."""
    name = f"sec3-{uniq}"
    r = run_cli("sandbox", "up", "--name", name, "--brokers", "3", "--kafka-version", "4.x",
                "--security", "sasl_ssl", "--sasl-mechanism", "SCRAM-SHA-512",
                "--sasl-mechanisms", "PLAIN,SCRAM-SHA-512", "--port", str(free_port_block(3)))
    assert r.code == 0, r.err
    try:
        ctx = f"sandbox-{name}-admin"
        assert run_cli("topics", "apply", "--context", ctx, "--execute").code == 0
        from opskit.sandbox.cluster import Sandbox

        conn = Sandbox(name).connection("admin", "SCRAM-SHA-512")
        md = AdminClient({**conn.to_librdkafka(), "log_level": 0}).list_topics(timeout=15)
        assert len(md.brokers) == 3
        health = run_cli("health", "--context", ctx, "-o", "json")
        assert health.code in (0, 1), health.err
        # a mechanism this listener does not enable: named, with the ones it does
        sb = Sandbox(name)
        st = sb.require()
        bad = run_cli("context", "set", f"s256-{uniq}", "-b", st.bootstrap, "--security-protocol",
                      "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-256", "--username", "admin",
                      "--password-file", str(sb.security(st).password_file("admin")),
                      "--ca", str(sb.security(st).ca_file))
        assert bad.code == 0, bad.err
        for cmd in (("lag", "--all-groups"), ("health",)):
            r = run_cli(*cmd, "--context", f"s256-{uniq}")
            assert r.code == exits.AUTH and len(r.err.strip().splitlines()) == 1, r.err
            assert "SASL mechanism SCRAM-SHA-256 is not enabled on the listener" in r.err
            assert "(it enables: PLAIN, SCRAM-SHA-512)" in r.err
    finally:
        assert run_cli("sandbox", "down", "--name", name).code == 0
    assert not any(n.startswith(f"sandbox-{name}") for n in
                   run_cli("context", "list", "-o", "json").out.split('"'))
    assert os.environ["OPSKIT_STATE"]  # the session's own state dir, never the user's
