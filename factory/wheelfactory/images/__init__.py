"""Build images: the offline Debian base, the Dockerfile templates rendered per variant, which
image a variant needs, and containers through the Docker SDK."""
