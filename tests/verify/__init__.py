"""Verification: repair, wheel checks, cuobjdump, ABI audits, smoke tests."""
