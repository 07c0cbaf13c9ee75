"""mylib's NVRTC kernels, kept as Python strings across these modules."""
