"""The wheel tag of a downstream package carrying artifacts: ``py3-none-<what cuda-cccl's wheel needs>``.

The artifacts hold no host code, so nothing ties them to a Python version or an ABI (``py3-none``). They
load only under the exact cuda-cccl that built them (the pin), so they run exactly where that cuda-cccl's
wheel installs: its platform tags decide the wheel's (cuda-cccl 1.2.1 on Linux x86_64:
``manylinux_2_26_x86_64``). That tag is one the package index accepts (PEP 600 ``manylinux_X_Y_<arch>``),
whereas the host's ``linux_x86_64`` is refused at upload. A package of NVRTC units only requires no cuda-cccl:
its artifacts run where cuda-bindings (which loads them) installs, so cuda-bindings' wheel decides
(:data:`NVRTC_DECIDING_DIST`).

cibuildwheel's default Linux repair (``auditwheel repair``) refuses such a wheel ("This does not look like a
platform wheel": there is no ELF file to graft or check), and it needs none: set
``[tool.cibuildwheel.linux] repair-wheel-command = ""`` (examples/*/pyproject.toml do).

The hatchling hook tags wheels with :func:`wheel_tag`; scikit-build-core projects force the same tag in an
override (``wheel.tags`` cannot be set in the static table), as ``examples/skbuild-mypkg`` does, and its test
checks that both agree with :func:`wheel_tag`.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
import sysconfig

#: The distribution whose wheel decides where the artifacts can be installed.
DECIDING_DIST = "cuda-cccl"
#: The same for a set of NVRTC units only (no cuda-cccl required): the bindings that load them.
NVRTC_DECIDING_DIST = "cuda-bindings"


def _host_platform() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def deciding_platforms(dist: str = DECIDING_DIST) -> list[str]:
    """The platform tags of the installed ``dist``'s wheel (its ``WHEEL`` file) for this machine's
    architecture, sorted; the host's own platform (``linux_x86_64``) where the wheel names none (a source
    or editable install), which no index accepts: the build then says so (:func:`publishable`)."""
    from packaging.tags import parse_tag
    try:
        text = importlib.metadata.distribution(dist).read_text("WHEEL") or ""
    except importlib.metadata.PackageNotFoundError:
        text = ""
    machine = platform.machine()
    found = {t.platform for line in text.splitlines() if line.startswith("Tag:")
             for t in parse_tag(line.split(":", 1)[1].strip())}
    mine = sorted(p for p in found if p.endswith("_" + machine))
    return mine or [_host_platform()]


def wheel_tag(cccl: bool = True) -> str:
    """``py3-none-<platforms>`` (compressed: ``py3-none-manylinux_2_26_x86_64``); ``cccl``: the artifacts
    include a cuda.compute (CCCL) one, so cuda-cccl's wheel decides, else cuda-bindings'."""
    return "py3-none-" + ".".join(deciding_platforms(DECIDING_DIST if cccl else NVRTC_DECIDING_DIST))


def publishable(platform_tag: str) -> bool:
    """Whether the package index accepts a Linux/any ``platform_tag`` (PyPI's rule, warehouse
    ``forklift/legacy.py``: ``any``, ``manylinux_X_Y_<arch>`` (PEP 600) and its legacy aliases
    ``manylinux1/2010/2014``, ``musllinux_X_Y_<arch>`` (PEP 656), ``linux_armv6l/armv7l``; never
    ``linux_x86_64``). Other operating systems are not ours to ship to."""
    arch = r"(x86_64|i686|aarch64|armv7l|ppc64|ppc64le|s390x|riscv64)"
    return bool(platform_tag == "any" or platform_tag in ("linux_armv6l", "linux_armv7l")
                or re.fullmatch(rf"(manylinux|musllinux)_\d+_\d+_{arch}", platform_tag)
                or re.fullmatch(r"manylinux(1|2010)_(x86_64|i686)", platform_tag)
                or re.fullmatch(rf"manylinux2014_{arch}", platform_tag))
