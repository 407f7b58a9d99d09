"""The runtime vendored into kernel packages: its rules, its JIT cache and loads."""
