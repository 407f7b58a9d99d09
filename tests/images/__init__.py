"""Base images and Dockerfiles, emulation."""
