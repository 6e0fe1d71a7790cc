"""Health I/O: the inputs of the health rules, read from a live cluster."""
