"""The build side: the matrix parser, the toolchain probe and the stand-in driver, one item's compile,
the parallel build driver, shard merging. Imports the core and the runtime's cache; never the CLI.
"""
