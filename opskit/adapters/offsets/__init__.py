"""Offset reset I/O: the reads a reset plan needs and the guarded commit."""
