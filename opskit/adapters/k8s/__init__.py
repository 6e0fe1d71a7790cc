"""Kubernetes: the one package that imports the kubernetes client."""
