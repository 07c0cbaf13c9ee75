"""The numba-cuda kernels aot served wrong, and the nvJitLink stack (the cases: .ci/gpu/numba_wrong_kernels.py,
whose text is their one definition; the GPU check launches them):

* an ``@overload``/``@overload_method``/``@overload_attribute`` implementation edited after the build kept the
  kernel's digest (the stale cubin wrote 6, numba-cuda's compile of the edited code 10);
* a kernel whose compile reads the launch configuration was shipped (aot's cubin wrote 0, numba-cuda 64);
* a kernel calling a device function was refused where numba-cuda sees no nvJitLink (the digest held ``lto``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("numba.cuda")

from conftest import ROOT, repo_env  # noqa: E402

import aot  # noqa: E402
from aot.core.errors import AotError, AotWarning  # noqa: E402
from aot.runtime.adapters.numba_digest import kernel_digest  # noqa: E402


def _cases():
    spec = importlib.util.spec_from_file_location("_aot_numba_wrong_kernels",
                                                  ROOT / ".ci" / "gpu" / "numba_wrong_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


W = _cases()


def script_env() -> dict:
    """The environment the lead runs the script in: no PYTHONPATH naming this checkout (the script puts it first
    itself; before, its children imported a venv's installed aot, another release: B attached)."""
    return {k: v for k, v in repo_env().items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def wrong(tmp_path_factory):
    folder = tmp_path_factory.mktemp("numba_wrong") / "w"
    said = W.prepare(folder, "90", env=script_env())
    return folder, said


def test_edited_overloads_are_refused_and_the_others_attach_with_or_without_nvjitlink(wrong):
    """Fresh processes: A (as built), B (the three overloads edited 6 -> 10), nolto (numba-cuda's nvJitLink probe
    says False, so its lto default is False). Before: B attached all three (0 warnings), nolto refused
    by_device_function with a warning."""
    folder, _ = wrong
    rc, lines = W.check(folder, cpu=True, env=script_env())
    table = "\n".join(lines)
    assert rc == 0, table
    rows = {(ln.split()[0], ln.split()[1]): ln for ln in lines if ln.split()[0] in ("A", "B", "nolto")
            and len(ln.split()) > 2 and ln.split()[1].startswith("by_")}
    for kernel in W.EDITED:
        assert " no: digest " in rows[("B", kernel)] and " yes " in rows[("A", kernel)], table
        assert " yes " in rows[("nolto", kernel)], table
    assert " yes " in rows[("nolto", "by_device_function")] and "nolto: 0 AotWarning(s)" in table, table
    # a fastmath kernel: its two builds (LTO or not change its code), the one numba-cuda would compile attached
    assert " yes " in rows[("A", "by_fastmath")] and " yes " in rows[("nolto", "by_fastmath.nolto")], table
    assert "B: 3 AotWarning(s)" in table, table


def test_the_build_refuses_a_kernel_whose_compile_reads_the_launch_configuration(wrong):
    """Before: ``aot build`` shipped by_launch_config, compiled outside any launch (it wrote 0; numba-cuda, compiling
    at a launch with 64 threads per block, 64)."""
    _, said = wrong
    assert W.REFUSED_AT_BUILD in said and "by_launch_config" in said, said
    assert "numba_wrong_pkg.ext:_block_threads" in said and "launch_config.blockdim" in said, said


CHECKS_ONLY = '''\
from numba import cuda
from numba.cuda import launchconfig
from numba.cuda.extending import overload


def launched():
    raise NotImplementedError


@overload(launched, target="cuda")
def _launched():
    n = 64 if launchconfig.current_launch_config() is not None else 0  # reads nothing of it: asks only

    def impl():
        return n
    return impl


@cuda.jit
def k(out):
    out[0] = launched()


@cuda.jit
def plain(out):
    out[0] = 7
'''


def _module(tmp_path: Path, name: str, text: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / f"{name}.py").write_text(text)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


#: The configuration read through numba-cuda's C accessor itself (not its launchconfig module): it sees the probe
#: because the build compiles inside the C dispatcher's call with the probe as the launch's configuration.
THROUGH_C = CHECKS_ONLY.replace("from numba.cuda import launchconfig",
                                "from numba.cuda.cext._dispatcher import get_current_launch_config as current")
THROUGH_C = THROUGH_C.replace("n = 64 if launchconfig.current_launch_config() is not None else 0  # reads nothing of it: "
                              "asks only", "cfg = current()\n    n = cfg.blockdim[0] if cfg is not None else 0")


@pytest.mark.parametrize("text, said", [(CHECKS_ONLY, "current_launch_config() from lc_"),
                                        (THROUGH_C, "launch_config.blockdim")], ids=["asks", "through-c"])
def test_a_compile_that_asks_for_the_launch_configuration_in_any_way_is_refused(tmp_path, text, said):
    from cccl_patches import numba_cuda as nc
    mod = _module(tmp_path, f"lc_{abs(hash(str(tmp_path))) % 10_000}", text)
    with pytest.raises(nc.NumbaCudaError, match="reads the launch configuration") as err:
        nc.compile_kernel(mod.k, "void(float32[::1])", 90, "ptx")
    assert said in str(err.value), str(err.value)
    ptx, _ = nc.compile_kernel(mod.plain, "void(float32[::1])", 90, "ptx")  # numba-cuda's own asking: not a read
    assert b".entry" in ptx
    ptx, _ = nc.compile_kernel(mod.plain, "void(float32[::1])", 90, "ptx")  # numba-cuda's own asking: not a read
    assert b".entry" in ptx


def test_a_kernel_numba_marked_launch_config_sensitive_is_not_served(wrong):
    from cccl_patches.numba_cuda import argtypes_of
    folder, _ = wrong
    site = folder / "site"
    sys.path.insert(0, str(site))
    try:
        kernels = importlib.import_module(f"{W.PKG}.kernels")
        reg = aot.Registry(site / W.PKG / "artifacts", owner=W.PKG)
        assert aot.attach_numba(reg, ["by_device_function"]) == {"by_device_function": "attached"}
        kernel = kernels.by_device_function
        assert kernel._cache.load_overload(argtypes_of(W.SIGNATURE), None) is not None
        kernel._launch_config_sensitive = True  # as numba-cuda sets it after a compile that marked it
        try:
            with pytest.warns(AotWarning, match="launch-config sensitive"):
                assert kernel._cache.load_overload(argtypes_of(W.SIGNATURE), None) is None
        finally:
            kernel._launch_config_sensitive = False
    finally:
        sys.path.remove(str(site))


DEVICE = '''\
from numba import cuda


@cuda.jit(device=True)
def dev(v):
    return v + 1


@cuda.jit
def k(out):
    out[0] = dev(out[1])
'''


def test_a_device_functions_lto_is_not_in_the_digest_its_fastmath_is(tmp_path):
    """compile_device never reads ``lto`` (numba-cuda's decorator sets it from nvJitLink's presence); it reads
    fastmath. Before: lto=True (here, nvJitLink installed) and lto=False (without it) were two digests."""
    n = abs(hash(str(tmp_path))) % 10_000
    digests = {}
    for lto in (True, False):
        for fast in (True, False):
            mod = _module(tmp_path / f"{lto}{fast}", f"dev_{lto}_{fast}_{n}", DEVICE)
            mod.dev.targetoptions.update(lto=lto, fastmath=fast)  # as the decorator would have set them
            digests[lto, fast] = kernel_digest(mod.k)
    assert digests[True, False] == digests[False, False]
    assert digests[True, True] == digests[False, True] != digests[False, False]


OPAQUE = '''\
from numba import cuda
from numba.cuda import types
from numba.cuda.extending import lower_builtin, type_callable


def seven():
    raise NotImplementedError


@type_callable(seven)
def _type_seven(context):
    def typer():
        return types.int64
    return typer


@lower_builtin(seven)
def _lower_seven(context, builder, sig, args):
    return context.get_constant(types.int64, 7)


@cuda.jit
def k(out):
    out[0] = seven()
'''


def test_a_low_level_typing_template_the_kernel_reaches_is_refused(tmp_path):
    """``@type_callable`` + ``@lower_builtin``: the lowering is nowhere the digest can read, so it refuses (at
    build: the spec, in one line; at attach: the kernel, to numba-cuda's JIT)."""
    mod = _module(tmp_path, f"opaque_{abs(hash(str(tmp_path))) % 10_000}", OPAQUE)
    with pytest.raises(AotError, match="k/seven is typed by .*CallableTemplate, a numba typing template aot "
                                       "cannot key"):
        kernel_digest(mod.k)


REWRITTEN = '''\
from numba import cuda


@cuda.jit
def k(out):
    out[0] = 1
'''


def test_a_library_rewrite_is_in_every_kernels_digest(tmp_path):
    from numba.cuda.core.rewrites import Rewrite
    from numba.cuda.core.rewrites.registry import rewrite_registry
    mod = _module(tmp_path, f"rewritten_{abs(hash(str(tmp_path))) % 10_000}", REWRITTEN)
    before = kernel_digest(mod.k)
    namespace: dict = {"Rewrite": Rewrite, "__name__": "somelib.rewrites"}
    source = ("class Noop(Rewrite):\n    def match(self, func_ir, block, typemap, calltypes):\n"
              "        return LIMIT < 0\n\n    def apply(self):\n        return None\n")
    path = str(tmp_path / "somelib_rewrites.py")
    (tmp_path / "somelib_rewrites.py").write_text(source)
    rewrites = rewrite_registry.rewrites["after-inference"]
    digests = []
    try:
        for limit in (1, 2):
            exec(compile(source, path, "exec"), namespace)
            namespace["LIMIT"] = limit
            rewrites.append(namespace["Noop"])
            try:
                digests.append(kernel_digest(mod.k))
            finally:
                rewrites.remove(namespace["Noop"])
    finally:
        import linecache
        linecache.cache.pop(path, None)
    assert digests[0] != before and digests[1] != digests[0]
    assert kernel_digest(mod.k) == before


def test_an_overload_registered_by_another_package_for_an_operator_stays_out(tmp_path):
    """A package's operator overloads serve its own types: they enter the digest of kernels that read something
    of that package, not every kernel's (else importing an unrelated numba extension would refuse them all)."""
    import operator

    from numba.cuda.extending import overload
    mod = _module(tmp_path, f"plainop_{abs(hash(str(tmp_path))) % 10_000}", REWRITTEN)
    before = kernel_digest(mod.k)
    namespace: dict = {"__name__": "otherlib.ops", "overload": overload, "operator": operator}
    exec("class Mine:\n    pass\n\n\ndef _add(a, b):\n    return None\n", namespace)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        overload(operator.add, target="cuda")(namespace["_add"])
    assert kernel_digest(mod.k) == before


def test_the_value_recheck_runs_once_per_signature_never_per_launch(wrong, monkeypatch):
    """Issue 42: what aot adds to a launch. The values-only digest runs when numba-cuda would compile (once per
    signature); afterwards numba-cuda's C dispatcher resolves the arguments to the packaged kernel by itself (the
    same call a launch makes, ``Dispatcher._cuda_call``, here with host arrays: no GPU), and aot's code never runs."""
    import numpy as np
    from numba.cuda.cext import _dispatcher

    from aot.runtime.adapters import numba_attach
    folder, _ = wrong
    site = folder / "site"
    sys.path.insert(0, str(site))
    try:
        kernels = importlib.import_module(f"{W.PKG}.kernels")
        reg = aot.Registry(site / W.PKG / "artifacts", owner=W.PKG)
        calls = []
        real = numba_attach.kernel_digest
        monkeypatch.setattr(numba_attach, "kernel_digest", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
        assert aot.attach_numba(reg, ["by_overload"]) == {"by_overload": "attached"}
        kernel = kernels.by_overload
        attach_calls = len(calls)
        args = np.zeros(2, np.float32)
        served = _dispatcher.Dispatcher._cuda_call(kernel, args)  # compiles: the packaged cache answers
        assert len(calls) == attach_calls + 1 and type(served._codelibrary).__name__ == "_PackagedLibrary"
        for _ in range(200):
            assert _dispatcher.Dispatcher._cuda_call(kernel, args) is served
        assert len(calls) == attach_calls + 1
    finally:
        sys.path.remove(str(site))
