"""wheelfactory's tests: one folder a concern, tiers by marker (CONTRIBUTING.md, Test tiers)."""
