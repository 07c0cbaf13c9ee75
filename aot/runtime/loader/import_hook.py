"""Make ``import cuda.compute`` work in a lean install (no CUDA toolkit), whoever imports it first.

A meta path finder that ignores every module but ``cuda.compute``. On that module's first import it calls
:func:`aot.runtime.loader.lean.prepare` (cuda-pathfinder finds the real NVRTC / nvJitLink / cudart, else aot's
stand-ins are preloaded under their sonames) and returns ``None``: the normal finders then import
cuda.compute, which finds its libraries "already loaded". It never creates a module spec itself.

Installed twice, idempotently (one finder per process, whichever copy came first):

* by ``import aot`` (``aot/__init__.py``), so ``import mypkg`` (whose ``__init__`` builds an
  ``aot.Registry``) followed by ``import cuda.compute`` works;
* at interpreter start by ``cccl_aot.pth`` at the site-packages root (``import _cccl_aot_hook``: this file,
  installed there under that name by CMakeLists.txt; ``cccl_aot.start`` names ``_cccl_aot_hook:install``
  for Python 3.15's PEP 829), so an application that imports cuda.compute before anything of aot works too.

Until cuda.compute is imported only ``os`` and ``sys`` are used (this runs in every interpreter start of
the environment: about 0.5 ms). ``AOT_IMPORT_HOOK=0`` switches it off (declared in :mod:`aot.core.env`;
read here directly, aot itself is not imported at start-up). Without site processing (``python -S``, an
embedded interpreter, aot vendored on ``PYTHONPATH``) no .pth runs: import aot or the package first.
"""

import os
import sys

#: Marks our finder whichever copy of this module created it (``aot.runtime.loader.import_hook`` or ``_cccl_aot_hook``).
_MARK = "_cccl_aot_cuda_compute_finder"
_TARGET = "cuda.compute"
_OFF = ("0", "false", "no", "off")


class CudaComputeFinder:
    """Prepares cuda.compute's libraries on its first import; finds nothing itself."""

    _cccl_aot_cuda_compute_finder = True

    def find_spec(self, fullname, path=None, target=None):
        if fullname == _TARGET:
            _prepare()
        return None  # never None-vs-False: None means "not mine, ask the next finder"

    def invalidate_caches(self):
        pass

    def __repr__(self):
        return "<aot CudaComputeFinder>"


def _prepare():
    try:
        from aot.runtime.loader import lean
    except ImportError:  # this copy outlived aot (a broken environment): do nothing
        return
    if _cccl_without_serialize():  # before anything loads NVRTC (issue 44): served compiles where packaged
        try:
            from aot.runtime.adapters.cccl_legacy_activate import activate
            activate()
        except ImportError:
            pass
    try:
        lean.prepare_for_import()
    except Exception as e:  # noqa: BLE001 - one line that says what to do, in place of cuda-pathfinder's
        raise ImportError(f"aot: cuda.compute needs NVRTC and nvJitLink, and aot could not stand in for "
                          f"them ({e}); install the CUDA toolkit ({lean.install_hint()}) or set "
                          f"AOT_IMPORT_HOOK=0 to see cuda.compute's own error") from None


def enabled():
    return os.environ.get("AOT_IMPORT_HOOK", "1").strip().lower() not in _OFF


def install():
    """Put the finder first on ``sys.meta_path`` once per process (no-op when off or already there)."""
    if enabled() and not any(getattr(f, _MARK, False) for f in sys.meta_path):
        sys.meta_path.insert(0, CudaComputeFinder())


install()


def _cccl_without_serialize():
    """Whether the installed cuda-cccl predates ``serialize`` (0.x, 1.0.x): only then is the adapters room
    imported here (:mod:`aot.runtime.adapters.cccl_legacy_activate`); one metadata read otherwise."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            v = version("cuda-cccl")
        except PackageNotFoundError:
            return False
    except ImportError:
        return False
    return v.startswith("0.") or v.startswith("1.0.") or v == "1.0"
