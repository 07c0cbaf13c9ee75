"""The command line: argument parsing and all printing. Nothing imports it but ``aot.__main__``.
"""
