"""The core: what every other layer stands on. Errors with exit codes, the env-var registry, hardened
file reads and atomic writes, the artifact format, the spec model and its one validator, manifests, SM
ranking, version rules. Imports nothing above it (only :mod:`aot.algorithms`, the leaf of field tables)
and no CUDA at import time.
"""
