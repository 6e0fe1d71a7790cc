"""`opskit lag` against a real broker: thresholds, unknown names, anomalies, rendering."""

from __future__ import annotations

import json

from opskit.cli import exits
from tests.helpers import commit, create_topic, produce, run_cli


def test_thresholds_drive_exit_codes(kafka, uniq):
    bs = kafka.bootstrap
    t, g = f"lagged_{uniq}", f"lagged-{uniq}"
    create_topic(bs, t, 2)
    produce(bs, t, {0: 300, 1: 200})
    commit(bs, g, {(t, 0): 0, (t, 1): 0})
    ok = run_cli("lag", "-g", g, "-b", bs, "-o", "json")
    assert ok.code == exits.OK and ok.json()["groups"][0]["total_lag"] == 500
    warn = run_cli("lag", "-g", g, "-b", bs, "-o", "json", "--warn", "100", "--crit", "1000")
    assert warn.code == exits.WARNING and warn.json()["severity"] == "WARNING"
    crit = run_cli("lag", "-g", g, "-b", bs, "--warn", "100", "--crit", "400")
    assert crit.code == exits.CRITICAL
    assert "CRITICAL" in crit.out and "lagged_" in crit.out  # the table names the topic


def test_thresholds_from_config_per_group(kafka, uniq, tmp_path, monkeypatch):
    bs = kafka.bootstrap
    t, g = f"cfg_{uniq}", f"cfg-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 50})
    commit(bs, g, {(t, 0): 0})
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"thresholds": {"default": {"lag_warn": 10, "lag_crit": 20},
                                              "groups": {g: {"lag_warn": 40, "lag_crit": 100}}}}))
    monkeypatch.setenv("OPSKIT_CONFIG", str(cfg))
    r = run_cli("lag", "-g", g, "-b", bs, "-o", "json")
    assert r.code == exits.WARNING
    assert r.json()["groups"][0]["thresholds"] == {"warn": 40, "crit": 100}


def test_unknown_group_and_topic(kafka, uniq):
    bs = kafka.bootstrap
    r = run_cli("lag", "-g", f"nosuch-{uniq}", "-b", bs)
    assert r.code == exits.NOT_FOUND and "does not exist" in r.err and "Traceback" not in r.err
    t, g = f"known_{uniq}", f"known-{uniq}"
    create_topic(bs, t, 1)
    commit(bs, g, {(t, 0): 0})
    r = run_cli("lag", "-g", g, "-t", f"nosuch_{uniq}", "-b", bs)
    assert r.code == exits.NOT_FOUND and "unknown topic" in r.err


def test_committed_below_log_start_reports_lost_records(kafka, uniq):
    """Retention deleted records the group never read: lag stays as Kafka reports it,
    and opskit counts the lost records."""
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient

    bs = kafka.bootstrap
    t, g = f"deleted_{uniq}", f"deleted-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 100})
    commit(bs, g, {(t, 0): 10})
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_records([CkTP(t, 0, 60)]).values():
        f.result(30)
    r = run_cli("lag", "-g", g, "-b", bs, "-o", "json")
    p = r.json()["groups"][0]["partitions"][0]
    assert p["log_start_offset"] == 60 and p["committed_offset"] == 10
    assert p["lag"] == 90 and p["records_lost"] == 50
    assert "committed_below_log_start" in p["anomalies"]
    table = run_cli("lag", "-g", g, "-b", bs)
    assert "50 records lost" in table.out and "retention deleted records" in table.out


def test_all_groups_and_topic_filter(kafka, uniq):
    bs = kafka.bootstrap
    t1, t2, g = f"f1_{uniq}", f"f2_{uniq}", f"filter-{uniq}"
    create_topic(bs, t1, 1)
    create_topic(bs, t2, 1)
    produce(bs, t1, {0: 5})
    produce(bs, t2, {0: 7})
    commit(bs, g, {(t1, 0): 0, (t2, 0): 0})
    r = run_cli("lag", "--all-groups", "-b", bs, "-o", "json")
    assert g in {x["group"] for x in r.json()["groups"]}
    r = run_cli("lag", "-g", g, "-t", t2, "-b", bs, "-o", "yaml")
    assert r.code == 0 and f"topic: {t2}" in r.out and t1 not in r.out
