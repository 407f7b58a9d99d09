"""The three project kinds, staging and `new`."""
