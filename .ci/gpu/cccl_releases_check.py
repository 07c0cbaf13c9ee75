"""One cuda-cccl release's GPU check of examples/hatch-mypkg (run by .ci/gpu/cccl_releases.sh): its CCCL specs
through aot's GPU check (each against numpy), which source served each and from which release's blob.

``packaged``: every CCCL spec of the package; ``jit`` (a release the wheel does not carry): product_i32 only (a
built-in operator: the machine lacks numba-cuda-mlir for the lambda specs). Prints one JSON object."""

import importlib.metadata as md
import json
import sys
import warnings

mode = sys.argv[1]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import mypkg_hatch
    from aot.verify.gpu import verify_gpu

    reg = mypkg_hatch.registry
    names = [n for n in reg.names() if reg.spec(n).family == "cccl"] if mode == "packaged" else ["product_i32"]
    served = {}
    for n in names:  # the loader's own choice, as the library's call gets it
        try:
            reg.cccl(n)
        except Exception as e:  # noqa: BLE001 - reported in the row
            served[n] = ("error", f"{type(e).__name__}: {e}"[:300])
    status = reg.status()
    rows = verify_gpu(reg, names, package="mypkg_hatch")  # the results, against numpy
out = []
for r in rows:
    st = status.get(r.spec)
    source, blob = served.get(r.spec, (st.source if st else "?", "-"))
    if st is not None and st.source == "packaged" and st.path:
        blob = st.path.split("/")[-2]
    out.append({"spec": r.spec, "source": source, "blob": blob,
                "status": r.status if r.ok else f"FAILED {r.detail}"[:300]})
print(json.dumps({"installed": md.version("cuda-cccl"), "mode": mode, "rows": out,
                  "warnings": [str(w.message) for w in caught if w.category.__name__ == "AotWarning"]}))
