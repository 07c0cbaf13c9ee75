"""Build one small cuda.compute object per placeholder site and iterator kind, the way aot's build workers
do (stand-in libcuda unless a driver is present, ``cccl_patches`` applied, ``compute_capability=[sm]``),
and print one JSON line per site: its name, the normalized blob's size and sha256 (PID zero runs
collapsed), and whether
``cccl_patches.PLACEHOLDER_ADDRESS`` occurs in it.

Run as a script (``python tests/cccl_sites.py [--sm 90] [site ...]``) by ``tests/test_cccl_patches.py``,
twice in separate processes, to prove byte-reproducibility across processes.
"""

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _setup():
    from aot.build.toolchain import choose_driver, cccl_ready, worker_setup
    worker_setup(choose_driver().path)
    cccl_ready()


def _sites():
    """name -> zero-argument builder returning an (unbuilt-until-called) make_* object factory."""
    import numpy as np
    import cuda.compute as cc
    from cuda.compute import types as ct
    from cuda.compute.op import RawOp
    from cccl_patches import placeholder_array as pa

    f32, i32, i64, f64 = np.float32, np.int32, np.int64, np.float64

    def out(dt):
        return cc.ProxyArray(np.dtype(dt))

    def square(x):
        return x * x

    def add_pairs(a, b):
        return (a[0] + b[0], a[1] + b[1])

    def reduce(d_in, dt=f32, op=cc.OpKind.PLUS, init=None):
        h_init = np.zeros(1, dt) if init is None else init
        return lambda sm: cc.make_reduce_into(d_in=d_in, d_out=out(dt), op=op, h_init=h_init,
                                              compute_capability=[sm])

    def select_mask(sm):
        mask = pa(np.uint8, (1,))

        def pred(i):
            return mask[i] != 0
        return cc.make_select(d_in=cc.CountingIterator(i32(0)), d_out=out(i32), d_num_selected_out=out(i64),
                              cond=pred, compute_capability=[sm])

    def lut_transform(sm):
        lut = pa(f32, (1,))

        def look(x: np.int32) -> np.float32:
            return lut[x]
        return cc.make_reduce_into(d_in=cc.TransformIterator(pa(i32), look), d_out=out(f32), op=cc.OpKind.PLUS,
                                   h_init=np.zeros(1, f32), compute_capability=[sm])

    def zip_reduce(sm):
        pair = np.dtype([("a", f64), ("b", f64)], align=True)
        return cc.make_reduce_into(d_in=cc.ZipIterator(pa(f64), pa(f64)), d_out=out(pair), op=add_pairs,
                                   h_init=np.zeros(1, pair), compute_capability=[sm])

    def reverse_out(sm):
        return cc.make_unary_transform(d_in=out(f32), d_out=cc.ReverseIterator(pa(f32)), op=square,
                                       compute_capability=[sm])

    def transform_out(sm):
        def half(x: np.float32) -> np.float32:
            return x * np.float32(0.5)
        return cc.make_unary_transform(d_in=out(f32), d_out=cc.TransformOutputIterator(pa(f32), half),
                                       op=square, compute_capability=[sm])

    def discard_out(sm):
        return cc.make_unary_transform(d_in=out(f32), d_out=cc.DiscardIterator(pa(f32)), op=square,
                                       compute_capability=[sm])

    def lower_bound_counting(sm):
        return cc.make_lower_bound(d_data=out(i32), d_values=cc.CountingIterator(i32(0)), d_out=out(np.uintp),
                                   compute_capability=[sm])

    raw_src = b'extern "C" __device__ void aot_raw_add(void* a, void* b, void* r)' \
              b'{ *(float*)r = *(float*)a + *(float*)b; }'
    raw_stateful_src = b'extern "C" __device__ void aot_raw_scaled(void* s, void* a, void* b, void* r)' \
                       b'{ *(float*)r = *(float*)a + *(float*)b * **(float**)s; }'

    def raw(sm, stateful):
        from cuda.compute._device_code import DeviceCode
        code = DeviceCode(raw_stateful_src if stateful else raw_src, kind="cpp_source")
        op = RawOp(ltoir=code, name="aot_raw_scaled" if stateful else "aot_raw_add",
                      state=(pa(f32).__cuda_array_interface__["data"][0]).to_bytes(8, "little") if stateful else b"",
                      state_alignment=8 if stateful else 1)
        return cc.make_reduce_into(d_in=out(f32), d_out=out(f32), op=op, h_init=np.zeros(1, f32),
                                   compute_capability=[sm])

    def transform_raw(sm):
        # inside an iterator a RawOp must be LTO-IR (cuda-cccl 1.2.1 links, never compiles, iterator code)
        from cuda.compute._cpp_compile import compile_cpp_to_ltoir
        src = 'extern "C" __device__ void aot_raw_neg(void* a, void* r){ *(float*)r = -*(float*)a; }'
        op = RawOp(ltoir=compile_cpp_to_ltoir(src, arch=f"sm_{sm}"), name="aot_raw_neg")
        it = cc.TransformIterator(pa(f32), op, ct.float32)
        return reduce(it)(sm)

    def deterministic(sm):
        from cuda.compute import Determinism
        return cc.make_reduce_into(d_in=out(f32), d_out=out(f32), op=cc.OpKind.PLUS, h_init=np.zeros(1, f32),
                                   determinism=Determinism.NOT_GUARANTEED, compute_capability=[sm])

    return {
        "transform_array_python": lambda sm: reduce(cc.TransformIterator(pa(f32), square))(sm),
        "transform_counting_python": lambda sm: reduce(cc.TransformIterator(cc.CountingIterator(i32(0)),
                                                                            square), i32)(sm),
        "transform_raw_op": transform_raw,
        "permutation": lambda sm: reduce(cc.PermutationIterator(pa(f32), pa(i32)))(sm),
        "reverse_input": lambda sm: reduce(cc.ReverseIterator(pa(f32)))(sm),
        "reverse_output": reverse_out,
        "zip_reduce": zip_reduce,
        "cache_modified": lambda sm: reduce(cc.CacheModifiedInputIterator(pa(f32), modifier="stream"))(sm),
        "constant": lambda sm: reduce(cc.ConstantIterator(f32(2.0)))(sm),
        "shuffle": lambda sm: reduce(cc.ShuffleIterator(16, seed=7), i64)(sm),
        "transform_output": transform_out,
        "discard_output": discard_out,
        "stateful_select_counting": select_mask,
        "stateful_transform_lut": lut_transform,
        "raw_op_stateless": lambda sm: raw(sm, False),
        "raw_op_stateful": lambda sm: raw(sm, True),
        "lower_bound_counting": lower_bound_counting,
        "determinism_not_guaranteed": deterministic,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sm", type=int, default=90)
    ap.add_argument("--unstable-symbols", action="store_true",
                    help="undo cccl_patches.symbols (to show that the reproducibility test can fail)")
    ap.add_argument("sites", nargs="*")
    args = ap.parse_args(argv)
    _setup()
    if args.unstable_symbols:
        import cuda.compute.iterators._base as base
        base._deterministic_suffix = base._deterministic_suffix._aot_original
    import cccl_patches
    from aot.build.normalize import normalize_internal_symbols
    sites = _sites()
    names = args.sites or list(sites)
    placeholder = cccl_patches.PLACEHOLDER_ADDRESS.to_bytes(8, "little")
    for name in names:
        try:
            blob = bytes(sites[name](args.sm).serialize())
        except Exception as e:  # noqa: BLE001 - reported per site, the test names the failure
            print(json.dumps({"site": name, "error": f"{type(e).__name__}: {e}"[:500]}), flush=True)
            continue
        blob = normalize_internal_symbols(blob, os.getpid())[0]
        # aot's normalization keeps the worker PID's digit count; collapse those zero runs (as
        # tests/test_wheel.py does) so that two processes compare equal whatever their PIDs
        blob = re.sub(rb"_00000000_0+", b"_00000000_0", blob)
        print(json.dumps({"site": name, "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest(),
                          "placeholder_in_blob": placeholder in blob}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
