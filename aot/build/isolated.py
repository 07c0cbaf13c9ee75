"""Let cuda-pathfinder see the CUDA toolkit of pip's isolated build environment.

``pip install .`` / ``pip wheel .`` build a package in an isolated environment: pip installs
``[build-system] requires`` (for a downstream package ``cccl-aot-cu13[cu13]``: aot and the CUDA toolkit
wheels) under temporary prefixes (``/tmp/pip-build-env-*/overlay`` and ``.../normal``) and puts their
site-packages on ``sys.path`` through a ``sitecustomize`` on ``PYTHONPATH``. ``site.getsitepackages()``
still names only the outer interpreter's prefixes, and cuda-pathfinder (1.9.0, checked) looks for the
toolkit's libraries (NVRTC, nvJitLink, nvvm, cudart), headers and bitcode only under
``site.getsitepackages()`` and the user site before it tries the system. So NVRTC is not found ("Failure
finding libnvrtc.so.13"), or worse, a system toolkit of another version is (headers from /usr/local/cuda).
``python -m build`` and uv isolate with a real venv, whose ``site.getsitepackages()`` is right.

cuda-python met the neighbouring problem in its own build hooks (NVIDIA/cuda-python PR #1817, discussion
#1887: there the isolated environment shadows the ``cuda`` namespace package, and they locate the installed
distribution through ``importlib.metadata`` and repair ``cuda.__path__``). Here importing works; the search
roots are what is missing. :func:`expose_build_env_toolkit` finds the site-packages folders that hold
NVIDIA toolkit distributions through ``importlib.metadata`` (that is, on ``sys.path``), and puts the prefix of
each one ``site.getsitepackages()`` does not list first in ``site.PREFIXES``, the documented list that
``site.getsitepackages()`` is derived from. Every cuda-pathfinder search then sees the build environment's
toolkit first (before the outer environment's, as isolation means), through its public behaviour only.

Limited to what is needed: where every toolkit distribution already lies in ``site.getsitepackages()`` (an
ordinary environment, a venv-isolated build, ``--no-build-isolation``) it changes nothing. It must run in
every process that loads the toolkit: the bundling process and each build worker (a spawned worker starts
with a fresh ``site``).
"""

from __future__ import annotations

import importlib.metadata
import os
import site
from pathlib import Path

#: The toolkit's wheels: ``nvidia-cuda-nvrtc``, ``nvidia-nvjitlink``, ``nvidia-nvvm`` (and their ``-cu12`` names).
_TOOLKIT_PREFIX = "nvidia-"


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def hidden_toolkit_sites() -> list[str]:
    """Site-packages folders on ``sys.path`` holding an NVIDIA toolkit distribution that
    ``site.getsitepackages()`` does not list (what cuda-pathfinder would miss), in ``sys.path`` order."""
    known = site.getsitepackages()
    found: list[str] = []
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if not name.startswith(_TOOLKIT_PREFIX):
            continue
        where = str(dist.locate_file(""))
        if where and not any(_same(where, k) for k in known) and not any(_same(where, f) for f in found):
            found.append(where)
    return found


def _prefix_of(site_dir: str) -> str | None:
    """The prefix whose ``site.getsitepackages([prefix])`` lists ``site_dir`` (``<prefix>/lib/pythonX.Y/
    site-packages``), else ``None`` (a layout ``site`` cannot describe: nothing to do for it)."""
    for prefix in Path(site_dir).parents:
        if any(_same(site_dir, s) for s in site.getsitepackages([str(prefix)])):
            return str(prefix)
    return None


def expose_build_env_toolkit() -> list[str]:
    """Put the prefixes of :func:`hidden_toolkit_sites` first in ``site.PREFIXES`` (idempotent); returns
    the prefixes added (empty outside pip's isolated builds)."""
    added = []
    for where in hidden_toolkit_sites():
        prefix = _prefix_of(where)
        if prefix is not None and prefix not in site.PREFIXES:
            added.append(prefix)
    site.PREFIXES[:0] = added
    return added
