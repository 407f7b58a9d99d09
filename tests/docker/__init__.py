"""Builds of real projects with the Docker engine (the `docker` marker; the lanes in tests/lanes.py)."""
