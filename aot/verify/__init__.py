"""Verification: numpy references, the GPU check context, ``verify --gpu`` and the integrity and
wheel-coverage checks. Stands on the core, the runtime and the build side.
"""
