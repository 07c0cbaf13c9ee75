"""Stand-in for the library's heavy dataframe dependency (pandas, pyarrow, shapely, ... in the real one).

It is never installed: the library's own tests put ``stubs/`` on PYTHONPATH, and a wheel build must not
need it (aot imports only the modules that name the kernels, not ``mylib/__init__.py``)."""


class Frame:
    """A table of columns, as the real dependency's DataFrame would hold the geometry's attributes."""

    def __init__(self, **columns):
        self.columns = dict(columns)
