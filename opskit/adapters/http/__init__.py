"""HTTP: a wall-clock deadline for one exchange, StreamNest's HTTP reads."""
