"""Grafana dashboards as code: ``dashboards/*.dashboard.py`` built with grafanalib."""
