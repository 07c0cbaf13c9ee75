"""Downstream packaging: ``[tool.aot]`` configuration, ``aot bundle`` and the hatchling build hook.
Stands on everything below it except the CLI.
"""
