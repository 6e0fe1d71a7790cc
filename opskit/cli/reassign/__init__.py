"""`opskit reassign`: plan, execute, control (status, cancel, verify)."""
