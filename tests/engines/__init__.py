"""Build engines: host and Docker, wheel sets, prepared environments, compile caches."""
