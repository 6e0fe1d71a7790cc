"""HIP-30's Kafka StatefulSet as its seed document describes it (bitnami/kafka:3.7,
KRaft combined mode, one node, static voter set), for the Kubernetes tests."""

from __future__ import annotations


def hip30_statefulset() -> dict[str, object]:
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "insights-kafka", "namespace": "hanzo"},
        "spec": {"replicas": 1, "serviceName": "insights-kafka",
                 "selector": {"matchLabels": {"app": "insights-kafka"}},
                 "template": {"metadata": {"labels": {"app": "insights-kafka"}}, "spec": {
                     "containers": [{"name": "kafka", "image": "bitnami/kafka:3.7", "env": [
                         {"name": "KAFKA_CFG_PROCESS_ROLES", "value": "broker,controller"},
                         {"name": "KAFKA_CFG_NODE_ID", "value": "0"},
                         {"name": "KAFKA_CFG_CONTROLLER_QUORUM_VOTERS",
                          "value": "0@insights-kafka-0.insights-kafka.hanzo.svc:9094"},
                         {"name": "KAFKA_CFG_LISTENERS",
                          "value": "PLAINTEXT://:9092,CONTROLLER://:9094"},
                         {"name": "KAFKA_CFG_LOG_RETENTION_HOURS", "value": "168"},
                         {"name": "KAFKA_KRAFT_CLUSTER_ID", "value": "abc"}],
                         "resources": {"requests": {"memory": "1Gi", "cpu": "500m"}}}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                     "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "50Gi"}}}}]},
    }
