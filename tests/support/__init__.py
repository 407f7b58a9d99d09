"""Support: atomic writes, confined reads, processes, progress."""
