"""The warmup: a registry's background warm pool (:mod:`.warmup`) and what "warm" means (:mod:`.warm`: every
kernel of a spec loaded into the device), so the first call runs like the second.

Imported by the registry when a warmup is first requested, never by a plain load.
"""
