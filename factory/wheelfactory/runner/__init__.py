"""The matrix run: every selected variant through an engine and verification, in parallel and
bounded, into dist/ with dist/manifest.json as the record of what was built."""
