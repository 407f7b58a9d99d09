"""Builds with the host engine, end to end."""
