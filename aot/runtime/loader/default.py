"""``aot``'s own registry: its packaged artifacts (``aot/artifacts``) and the bundled matrix's specs.

Cheap, like every registry's front (:mod:`aot.runtime.loader.registry`): ``default_registry()`` records where
the artifacts are; the manifest and the bundled specs (``aot/default_specs.json``) are read on first need,
in the warmup thread when ``aot.request_warmup()`` comes first.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from .registry import Registry

if TYPE_CHECKING:
    from ...core.spec import Spec

_default: Registry | None = None
_default_lock = threading.Lock()


def _bundled_specs() -> list[Spec]:
    """The bundled matrix's specs, for JIT (the runtime parses no YAML); an AotError is one warning."""
    from . import default_specs
    return default_specs.load()


def default_registry() -> Registry:
    """``aot``'s own packaged artifacts (``aot/artifacts``), with the bundled matrix's specs for JIT."""
    global _default
    with _default_lock:
        if _default is None:
            here = os.path.dirname(os.path.abspath(__file__))  # aot/runtime/loader
            root = os.path.join(os.path.dirname(os.path.dirname(here)), "artifacts")
            _default = Registry(root, _specs_from=_bundled_specs)
        return _default
