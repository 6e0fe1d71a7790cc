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
    update_strategy,
    voter_pods,
    with_env,
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


def test_rbac_pins_every_write_to_the_objects_of_the_run() -> None:
    """The rolling restart may update the combined StatefulSet (never patch or delete
    it) and delete the pods of the two StatefulSets by name, nothing else."""
    rules = rbac_rules("insights-kafka", brokers=3)
    writes = [r for r in rules if r["resources"] == ["statefulsets"]
              and set(r["verbs"]) & {"patch", "update", "delete"}]
    assert writes and not any("delete" in r["verbs"] for r in writes)
    for r in writes:
        allowed = {"insights-kafka", "insights-kafka-broker"} if r["verbs"] == ["update"] \
            else {"insights-kafka-broker"}
        assert set(r["resourceNames"]) <= allowed, r
    pod_deletes = [r for r in rules if r["resources"] == ["pods"] and "delete" in r["verbs"]]
    assert [sorted(r["resourceNames"]) for r in pod_deletes] == [sorted(
        [f"insights-kafka-{i}" for i in range(3)] + [f"insights-kafka-broker-{i}"
                                                      for i in range(3)])]
    assert not any("delete" in r["verbs"] for r in rules
                   if r["resources"] not in (["configmaps"], ["pods"]))
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


def test_with_env_sets_each_setting_once_in_place_or_appended_and_is_idempotent() -> None:
    combined = hip30_statefulset()
    wanted = {"log.retention.hours": "24", "default.replication.factor": "3"}
    once = with_env(combined, wanted)
    twice = with_env(once, wanted)
    assert once == twice and combined == hip30_statefulset()      # a copy, input untouched
    env = [e["name"] for e in once["spec"]["template"]["spec"]["containers"][0]["env"]]
    before = [e["name"] for e in combined["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert env == before + ["KAFKA_CFG_DEFAULT_REPLICATION_FACTOR"]   # retention in place
    assert env_changes([once], wanted) == {}
    assert env_changes([combined], wanted) == {"insights-kafka": {
        "KAFKA_CFG_LOG_RETENTION_HOURS": "168", "KAFKA_CFG_DEFAULT_REPLICATION_FACTOR": None}}


def test_broker_statefulset_from_an_updated_combined_one_is_the_same_object_again() -> None:
    """add_node run again after the rolling restart must change nothing: the broker-only
    StatefulSet made from the updated combined one equals the one the restart wrote."""
    wanted = {"default.replication.factor": "3", "min.insync.replicas": "2"}
    a = broker_statefulset(with_env(hip30_statefulset(), wanted), first_id=1, replicas=2,
                           namespace="hanzo")
    b = broker_statefulset(with_env(with_env(hip30_statefulset(), wanted), wanted),
                           first_id=1, replicas=2, namespace="hanzo")
    assert a == b and env_changes([a], wanted) == {}
    assert update_strategy(a) == "OnDelete"                  # only opskit rolls its pods
    assert update_strategy(hip30_statefulset()) == "RollingUpdate"   # Kubernetes' default


def test_voter_pods_maps_node_ids_to_the_combined_statefulsets_pods() -> None:
    assert voter_pods(hip30_statefulset()) == {0: "insights-kafka-0"}
    three = with_env(hip30_statefulset(), {"controller.quorum.voters": ",".join(
        f"{i}@insights-kafka-{i}.insights-kafka.hanzo.svc:9094" for i in range(3))})
    assert voter_pods(three) == {0: "insights-kafka-0", 1: "insights-kafka-1",
                                 2: "insights-kafka-2"}
    elsewhere = with_env(hip30_statefulset(), {"controller.quorum.voters":
                                               "0@kafka-ctrl-0.other.svc:9094"})
    assert voter_pods(elsewhere) == {}      # not this StatefulSet's pod: not guessed
