"""opskit: operations and observability toolkit for Kafka (HIP-30)."""

__version__ = "0.1.0"
