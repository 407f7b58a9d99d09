"""The sample kernels' ops against their reference."""
