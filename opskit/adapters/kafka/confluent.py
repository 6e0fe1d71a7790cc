"""confluent-kafka, imported on first use.

Importing ``confluent_kafka`` costs about 40 ms (it pulls in asyncio for its
serializers). Commands served entirely by opskit's protocol-level reads
(``opskit lag`` on a PLAINTEXT or SSL cluster) never need it, so the adapters
refer to its classes as ``ck.Name`` through this module, which imports the
package the first time a name is looked up.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "AdminClient": "confluent_kafka.admin",
    "AlterConfigOpType": "confluent_kafka.admin",
    "ConfigEntry": "confluent_kafka.admin",
    "ConfigResource": "confluent_kafka.admin",
    "NewPartitions": "confluent_kafka.admin",
    "NewTopic": "confluent_kafka.admin",
    "OffsetSpec": "confluent_kafka.admin",
    "ResourceType": "confluent_kafka.admin",
    "Consumer": "confluent_kafka",
    "ConsumerGroupState": "confluent_kafka",
    "ConsumerGroupTopicPartitions": "confluent_kafka",
    "KafkaError": "confluent_kafka",
    "KafkaException": "confluent_kafka",
    "TopicPartition": "confluent_kafka",
    "TopicCollection": "confluent_kafka",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value
