"""Planning, pure: matrix.toml and the compatibility table read into typed values, variant
identities, and the expansion into variants plus every pruned combination with its reason.
Nothing here touches Docker, compilers, the network or the output directory (import-linter checks)."""
