"""Prometheus exporter."""
