"""Dead-letter topic reading and the watcher's state."""
