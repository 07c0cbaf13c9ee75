"""Operators from code of geo-mypkg's matrix (numba-compiled at build time on the CPU host; never at run
time: the installed wheel's artifacts hold them compiled)."""


def add_xy(a, b):
    """Both coordinates added: a zip of (x, y) arrays reduced to their sums."""
    return (a[0] + b[0], a[1] + b[1])
