"""Small helpers every concern uses: atomic file writes, logged subprocesses, progress events and
the files wheelfactory ships (Dockerfile templates, the runtime)."""
