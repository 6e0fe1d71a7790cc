"""The CronJob manifest and the env report of the Kubernetes scale-out (pure parts)."""

from __future__ import annotations

import pytest
from hip30_k8s import hip30_statefulset

from opskit.core.scaleout.cronjob import CronJobSpec, cronjob_objects, rbac_rules
from opskit.core.scaleout.k8s import (
    broker_first_id,
    broker_statefulset,
    env_changes,
    env_name,
)
from opskit.errors import InvalidInputError, UsageError


def spec(**kw: object) -> CronJobSpec:
    base: dict[str, object] = {"namespace": "hanzo", "statefulset": "insights-kafka",
                                   "image": "img:1", "schedule": "0 2 * * *", "window": "02:00-05:00Z",
                                   "context": "kafka", "config_secret": "opskit-config"}
    base.update(kw)
    return CronJobSpec(**base)  # type: ignore[arg-type]


def test_cronjob_runs_the_playbook_once_at_a_time_with_credentials_from_a_secret() -> None:
    sa, role, binding, cron = cronjob_objects(spec())
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"] == binding["subjects"][0]["name"]
    cmd = pod["containers"][0]["command"]
    assert cmd[cmd.index("--window") + 1] == "02:00-05:00Z" and cmd[-1] == "--execute"
    assert cmd[cmd.index("--context") + 1] == "kafka"
    assert pod["volumes"][0]["secret"]["secretName"] == "opskit-config"
    assert all("value" in e for e in pod["containers"][0]["env"])   # paths only, no secret
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_rbac_never_lets_the_job_change_the_combined_statefulset() -> None:
    rules = rbac_rules("insights-kafka")
    writes = [r for r in rules if r["resources"] == ["statefulsets"]
              and set(r["verbs"]) & {"patch", "update", "delete"}]
    assert writes and all(r["resourceNames"] == ["insights-kafka-broker"] for r in writes)
    assert not any("delete" in r["verbs"] for r in rules if r["resources"] != ["configmaps"])
    assert not any(r["resources"] == ["secrets"] for r in rules)


@pytest.mark.parametrize("bad", [{"schedule": "every night"}, {"namespace": "Bad_NS"},
                                 {"image": "two words"}, {"statefulset": ""}])
def test_bad_cronjob_input_is_a_usage_error(bad: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        cronjob_objects(spec(**bad))


def test_env_changes_name_the_bitnami_variables_that_differ() -> None:
    combined = hip30_statefulset()
    broker = broker_statefulset(combined, first_id=1, replicas=2, namespace="hanzo")
    wanted = {"default.replication.factor": "3", "log.retention.hours": "168"}
    got = env_changes([combined, broker], wanted)
    assert env_name("default.replication.factor") == "KAFKA_CFG_DEFAULT_REPLICATION_FACTOR"
    assert got == {"insights-kafka": {"KAFKA_CFG_DEFAULT_REPLICATION_FACTOR": None},
                   "insights-kafka-broker": {"KAFKA_CFG_DEFAULT_REPLICATION_FACTOR": None}}


def test_paging_mounts_the_routing_key_from_the_secret_only_when_asked() -> None:
    plain = cronjob_objects(spec())[3]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    paged = cronjob_objects(spec(page=True))[3]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "--routing-key-file" not in plain["containers"][0]["command"]
    cmd = paged["containers"][0]["command"]
    assert cmd[cmd.index("--routing-key-file") + 1] == "/etc/opskit/pagerduty-routing-key"
    assert [i["key"] for i in paged["volumes"][0]["secret"]["items"]] == [
        "config.yaml", "pagerduty-routing-key"]


def test_broker_first_id_is_read_back_from_the_statefulset_opskit_made() -> None:
    broker = broker_statefulset(hip30_statefulset(), first_id=3, replicas=1, namespace="hanzo")
    assert broker_first_id(broker) == 3
    with pytest.raises(InvalidInputError):
        broker_first_id(hip30_statefulset())
