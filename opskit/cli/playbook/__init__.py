"""`opskit playbook`: scale-out and multi-rack, their inputs, runs and the Kubernetes platform."""
