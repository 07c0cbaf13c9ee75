"""Every cuda.compute algorithm aot builds: one definition each, in one place.

A definition (one small module per algorithm or family) holds everything aot knows about it: its spec
fields and defaults, how those fields become the ``cuda.compute.make_*`` factory's arguments (over
``ProxyArray`` placeholders at build time), which call arguments bind its operators at call time, and its
numpy reference with verification inputs. :mod:`aot.build.matrix`, :mod:`aot.build.compile`,
:mod:`aot.runtime.loader.registry` and :mod:`aot.verify.context` read these objects; adding an algorithm is one
module here plus tests. This package is the bottom layer: it imports nothing else from aot.

The shape follows cibuildwheel's ``platforms/__init__.py``: a Protocol and a dict of implementations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, cast

from ._base import (BUILTIN_OPS, DTYPES, INPUTS, REQUIRED, SORT_ORDERS, AlgorithmBase, Build, Check, OpSlot,
                    References, init_value, is_dtype_field, np_dtype)


class Algorithm(Protocol):
    """One cuda.compute algorithm, as aot builds, binds and checks it."""

    name: str                                  # the spec's ``algorithm:``
    factory: str                               # the cuda.compute ``make_*`` function
    fields: Mapping[str, Any]                  # spec field -> default (``REQUIRED`` if none)
    ops: tuple[OpSlot, ...]                    # its operator fields and their call keywords
    call_defaults: Mapping[str, Any]           # call arguments filled in when left out
    choices: Mapping[str, tuple[str, ...]]     # enum fields
    int_ranges: Mapping[str, tuple[int, int]]  # integer fields
    struct_fields: tuple[str, ...]             # dtype fields that may name a struct type
    optional: Mapping[str, Any]                # fields recorded only when not at their default
    seqs: tuple[Any, ...]                      # sequence fields that may be iterators (forms.Seq)
    refused: Mapping[str, Mapping[str, str]]   # choice values refused, with the reason

    def bound_arguments(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """Call arguments filled in when the caller leaves them out (compiled-in values)."""

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        """The factory's keyword arguments for a spec's params ``p``."""

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        """Run ``obj`` (the loaded algorithm, operators bound) on ``c``'s device; raise on a mismatch."""


def _algorithms() -> dict[str, Algorithm]:
    from . import binary_search, histogram, reduce, scan, select, sort, three_way_partition, transform, unique
    return {a.name: cast(Algorithm, a) for a in (
        scan.EXCLUSIVE_SCAN, scan.INCLUSIVE_SCAN, reduce.REDUCE, reduce.SEGMENTED_REDUCE, select.SELECT,
        binary_search.LOWER_BOUND, binary_search.UPPER_BOUND, sort.RADIX_SORT, sort.MERGE_SORT,
        unique.UNIQUE_BY_KEY, sort.SEGMENTED_SORT, transform.UNARY_TRANSFORM, transform.BINARY_TRANSFORM,
        histogram.HISTOGRAM_EVEN, three_way_partition.THREE_WAY_PARTITION)}


if TYPE_CHECKING:
    ALGORITHMS: dict[str, Algorithm]


def __getattr__(name: str) -> Any:
    """``ALGORITHMS`` (the nine algorithm modules, 5-10 ms to import) on first use (issue 42): reading a manifest of
    NVRTC units, numba or CuPy kernels validates no CCCL spec and needs none of them (``aot.algorithms.forms``, which
    the spec rules import, runs this package's ``__init__`` first)."""
    if name == "ALGORITHMS":
        table = globals().get("_TABLE")
        if table is None:
            table = globals()["_TABLE"] = _algorithms()
        globals()["ALGORITHMS"] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ALGORITHMS", "Algorithm", "AlgorithmBase", "Build", "BUILTIN_OPS", "Check", "DTYPES", "INPUTS",
           "OpSlot", "REQUIRED", "References", "SORT_ORDERS", "init_value", "is_dtype_field", "np_dtype"]
