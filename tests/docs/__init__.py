"""The docs site and README: built strictly, every claim checked."""
