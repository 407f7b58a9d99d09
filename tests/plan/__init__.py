"""Planning: matrix.toml, the compatibility table, expansion, identities."""
