"""The matrix run: the manifest, cache keys, provenance, cancels."""
