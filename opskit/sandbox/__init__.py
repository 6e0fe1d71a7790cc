"""Local real Kafka clusters (KRaft, JVM processes on loopback) and workloads."""
