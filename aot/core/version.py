"""aot's version: one place (pyproject.toml reads it with a regex; every artifact header records it)."""

__version__ = "0.1.0"
