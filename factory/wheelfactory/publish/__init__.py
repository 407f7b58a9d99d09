"""From dist/ to what users install: per-variant indexes, wheel-variant metadata, the Hugging Face
kernels layout, the static server, `which`, and the matrix report."""
