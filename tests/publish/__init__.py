"""Indexes, variant metadata, the Hub layout, serve, which, report, publishing."""
