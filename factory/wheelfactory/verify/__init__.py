"""After an engine builds: auditwheel repair and the wheel checks, what a CUDA binary holds
(cuobjdump), ROCm device code, and rewriting a finished wheel (local labels)."""
