"""Does Triton's compiled output for the same inputs differ by CPython? Run this under each Python (one Triton
release installed in each): it compiles examples/triton-mypkg's kernels for an explicit target (no driver) into a
private cache and prints, per kernel, the sha256 of the cubin and of the metadata (its host path masked), and
Triton's cache key. Equal cubins and metadata under two Pythons, with different keys, show that the key's
``libtriton`` hash (a CPython extension: one build per CPython) protects nothing the code depends on; aot's key
(``aot/runtime/adapters/triton_pykey.py``, loaded by path: no aot dependency needed) is printed beside Triton's.

    python benchmarks/triton_per_python.py [SM]    # one JSON line
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _kernels():
    """triton_mypkg.kernels without the package's ``__init__`` (which imports aot: absent from a bare Python)."""
    import importlib.util
    import types
    pkg = types.ModuleType("triton_mypkg")
    pkg.__path__ = [str(ROOT / "examples" / "triton-mypkg" / "triton_mypkg")]
    sys.modules["triton_mypkg"] = pkg
    spec = importlib.util.spec_from_file_location("triton_mypkg.kernels", f"{pkg.__path__[0]}/kernels.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _pykey():
    import importlib.util
    spec = importlib.util.spec_from_file_location("_pykey", ROOT / "aot" / "runtime" / "adapters" / "triton_pykey.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.watch()
    return mod


def main() -> None:
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.cache import triton_key
    k = _kernels()
    pykey = _pykey()
    from triton.runtime.cache import _base32
    sm = int(sys.argv[1]) if len(sys.argv) > 1 else 90
    home = os.path.dirname(triton.__file__)
    div = [["tt.divisibility", 16]]
    cases = {
        "add": ASTSource(k.add, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                         {(4,): 1024}, {(0,): div, (1,): div, (2,): div, (3,): div}),
        "scale_shift": ASTSource(k.scale_shift, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                                 {(3,): 1024}, {(0,): div, (1,): div, (2,): div}),
    }
    out = {"python": sys.version.split()[0], "triton": triton.__version__, "triton_key":
           hashlib.sha256(triton_key().encode()).hexdigest()[:16], "kernels": {}}
    with tempfile.TemporaryDirectory(prefix="aot-perpy-") as tmp, knobs.cache.scope():
        knobs.cache.dir = tmp
        for name, src in cases.items():
            c = triton.compile(src, target=GPUTarget("cuda", sm, 32), options={"num_warps": 4})
            group = c.metadata_group
            fn = src.name[:150]
            cubin = Path(group[f"{fn}.cubin"]).read_bytes()
            meta = json.loads(Path(group[f"{fn}.json"]).read_text())
            meta.pop("hash", None)
            meta_text = json.dumps(meta, sort_keys=True).replace(home, "{triton}")
            ptx = Path(group[f"{fn}.ptx"]).read_bytes() if f"{fn}.ptx" in group else b""
            out["kernels"][name] = {"cubin": hashlib.sha256(cubin).hexdigest()[:16], "bytes": len(cubin),
                                    "ptx": hashlib.sha256(ptx).hexdigest()[:16],
                                    "metadata": hashlib.sha256(meta_text.encode()).hexdigest()[:16],
                                    "key": c.hash[:16], "aot_key": (pykey.noted(_base32(c.hash)) or ["-"])[0][:16]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
