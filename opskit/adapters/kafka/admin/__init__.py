"""librdkafka's admin client (confluent-kafka) in parts, one concept each:
:class:`opskit.adapters.kafka.admin.client.KafkaAdmin` puts them together.

* :mod:`.meta`: what the reads return (cluster metadata, log offsets);
* :mod:`.errors`: vendor errors translated into opskit's, and the APIs a broker
  was seen not to serve;
* :mod:`.session`: the connection, its capabilities and bounded waits;
* :mod:`.groups`: consumer groups and their committed offsets;
* :mod:`.offsets`: log offsets and offsets by time;
* :mod:`.topics`: topic and broker configs, topic changes.
"""
