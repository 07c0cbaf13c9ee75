"""A downstream GPU library whose compile function (raw ``cuda.bindings.nvrtc``, modules keyed by source
hash, ``CUfunction`` launches) adopted aot by a few lines: ``adopt_mypkg.ops.saxpy/scale/block_sums``."""
