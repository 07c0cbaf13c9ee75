"""`.ci/gpu/record.sh`'s command (run under `aot record`) and its check (`record_gpu.py check m.yaml RC`)."""
import os
import sys
from pathlib import Path

KLIB = {
    "LB": 'extern "C" __global__ void __launch_bounds__(256, 4) scale_lb(float* x) { x[threadIdx.x] *= 2; }',
    "MACRO": '#define KERNEL extern "C" __global__\n#define BOUNDS __launch_bounds__(64)\n'
             'KERNEL void BOUNDS macro_kernel(int* y) { y[threadIdx.x] = 3; }\n',
    "TEMPLATE": 'template <typename T, int N> __global__ void __launch_bounds__(N) fill(T* x) '
                '{ x[threadIdx.x] = N; }\n',
}


def command() -> None:
    import numpy as np
    from numba import cuda
    Path("klib").mkdir(exist_ok=True)
    Path("klib/__init__.py").write_text("".join(f"{k} = {v!r}\n" for k, v in KLIB.items()))
    sys.path.insert(0, os.getcwd())
    import klib
    from numba_mypkg import kernels as k
    n = 1000
    for dt in (np.float32, np.float64):
        x, y = np.arange(n, dtype=dt), np.ones(n, dt)
        out = cuda.device_array(n, dt)
        k.axpy[4, 256](out, cuda.to_device(x), cuda.to_device(y), dt(2.5))
        np.testing.assert_allclose(out.copy_to_host(), dt(2.5) * x + y)
    d = cuda.to_device(np.ones(n, np.float32))
    k.scale_inplace[4, 128](d, np.float32(3.0), np.int64(n))
    assert (d.copy_to_host() == 3).all()
    o = cuda.device_array(n)
    k.smooth[4, 256](o, cuda.to_device(np.linspace(-1, 1, n)), -0.5, 0.5)
    s = cuda.device_array(4, np.int64)
    k.block_sum[4, 256](s, cuda.to_device(np.ones(n, np.int64)))
    assert list(s.copy_to_host()) == [256, 256, 256, 232]
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    arch = f"sm_{dev.compute_capability.major}{dev.compute_capability.minor}"
    for text, names, kernel, dtype, expect in ((klib.LB, (), "scale_lb", np.float32, 2),
                                               (klib.MACRO, (), "macro_kernel", np.int32, 3),
                                               (klib.TEMPLATE, ("fill<int, 64>",), "fill<int, 64>", np.int32, 64)):
        mod = Program(text, "c++", ProgramOptions(arch=arch)).compile("cubin", name_expressions=names)
        buf = cuda.to_device(np.ones(64, dtype))
        ptr = np.uint64(buf.device_ctypes_pointer.value)
        launch(stream, LaunchConfig(grid=1, block=64), mod.get_kernel(kernel), ptr)
        stream.sync()
        assert (buf.copy_to_host() == expect).all(), (kernel, buf.copy_to_host()[:4])
    print("launches: all right under the recorder")


def check(matrix: str, rc: int) -> int:
    import yaml
    problems = []
    if rc != 0:
        problems.append(f"aot record exited {rc}")
    try:
        doc = yaml.safe_load(Path(matrix).read_text())
    except OSError as e:
        doc, _ = {}, problems.append(f"no matrix: {e}")
    numba = {e["kernel"]: e["signatures"] for e in doc.get("numba", [])}
    want = {"numba_mypkg.kernels:axpy": ["void(float32[::1], float32[::1], float32[::1], float32)",
                                         "void(float64[::1], float64[::1], float64[::1], float64)"],
            "numba_mypkg.kernels:scale_inplace": ["void(float32[::1], float32, int64)"],
            "numba_mypkg.kernels:smooth": ["void(float64[::1], float64[::1], float64, float64)"],
            "numba_mypkg.kernels:block_sum": ["void(int64[::1], int64[::1])"]}
    if numba != want:
        problems.append(f"numba entries {numba}")
    nvrtc = {e["source"]: e["kernels"] for e in doc.get("nvrtc", [])}
    if nvrtc != {"klib:LB": ["scale_lb"], "klib:MACRO": ["macro_kernel"], "klib:TEMPLATE": ["fill<int, 64>"]}:
        problems.append(f"nvrtc kernels {nvrtc}")
    problems += replay(Path(matrix).with_name(Path(matrix).stem + ".launches"))
    print("record-gpu:", "ok" if not problems else "FAILED: " + "; ".join(problems))
    return 1 if problems else 0


def replay(folder: Path) -> list:
    """The kept launches (issue 36.3) replayed through each kernel's own dispatcher (numba-cuda JIT here), and
    axpy.0's through a mutant kernel, which must fail."""
    import types
    from numba import cuda
    from aot.verify.launches import LaunchMismatch, launch_check, read_index
    from aot.verify.numba_gate import NumbaCheckContext
    from numba_mypkg import kernels as k
    problems = []
    try:
        index = read_index(folder)
    except Exception as e:  # noqa: BLE001
        return [f"launches: {e}"]
    if sorted(index) != ["axpy.0", "axpy.1", "block_sum", "scale_inplace", "smooth"]:
        problems.append(f"launches kept: {sorted(index)}")
    for name, entry in index.items():
        kernel = getattr(k, entry["kernel"].split(":")[1])
        ctx = NumbaCheckContext(kernel, types.SimpleNamespace(signature=entry["signature"]), None, "jit")
        try:
            launch_check(folder, entry)(ctx)
        except Exception as e:  # noqa: BLE001
            problems.append(f"replay of {name}: {type(e).__name__}: {e}")

    @cuda.jit
    def axpy_mutant(out, x, y, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] - y[i]
    if "axpy.0" in index:
        ctx = NumbaCheckContext(axpy_mutant, types.SimpleNamespace(signature=index["axpy.0"]["signature"]), None,
                                "jit")
        try:
            launch_check(folder, index["axpy.0"])(ctx)
            problems.append("the mutant passed the replay of axpy.0")
        except LaunchMismatch as e:
            print(f"mutant caught: {e}")
    print(f"replayed {len(index)} kept launches")
    return problems


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"]:
        sys.exit(check(sys.argv[2], int(sys.argv[3])))
    command()
