"""`opskit offsets`: the commands and the apply path."""
