"""wheelfactory: a multi-variant wheel factory for PyTorch C++/CUDA/ROCm kernels.

The build side. Planning (``matrix``, ``compat``, ``plan``, ``variant``) is pure: it reads
matrix.toml and the compatibility table and never touches Docker, compilers or the network.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
