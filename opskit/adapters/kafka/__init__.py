"""Kafka clients: the reader port and its implementations (opskit's own protocol client, librdkafka), the admin clients (confluent-kafka, kafka-python), broker capabilities and quirks."""
