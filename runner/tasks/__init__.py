"""Tasks and probes: pure functions over plain data, no I/O beyond reading task files."""
