"""The digest of a ``@triton.jit`` kernel: what Triton compiles into its code, so an edit to any of it is another
content key at build and a refused serve at load (:mod:`aot.runtime.adapters.triton_attach`).

Triton compiles a kernel from its source (the AST) and the values of the names it reads when it compiles: a
``tl.constexpr`` global, a module attribute ``cfg.BLOCK``, a ``@triton.jit`` function it calls (by name or as
``helpers.dev``), a ``tl.constexpr_function``, a dtype. Its own cache key (``JITCallable.cache_key``) hashes the
source, the called functions' keys and the constexpr globals read by plain name, but not a constexpr reached as a
module attribute (``cfg.BLOCK``: ``DependenciesFinder.visit_Attribute`` records no value), nor a value Triton freezes
in under ``TRITON_ALLOW_NON_CONSTEXPR_GLOBALS``. This digest reads what the kernel reads, the way
:mod:`aot.runtime.adapters.numba_digest` does for numba-cuda (the names its bytecode loads, ``module.attr`` chains
followed to the value):

* each function's source (decorator included: ``do_not_specialize``, ``noinline``), its defaults, and the value of
  every global or closure name it loads;
* a value by content: ``None``/bool/int/float/complex/str/bytes; tuples and lists (named tuples too) element by
  element; ``tl.constexpr(v)`` by ``v``; a dtype by its name; a ``@triton.jit`` function or ``constexpr_function``
  by its own digest, recursively;
* Triton's own objects (``tl.load``, ``tl.float32``, ``libdevice`` functions), ``math`` and builtins by qualified
  name: their code is the installed Triton's, whose build the spec records (``triton_build``); classes by name.

Anything else (an instance of a library's own class) is refused, naming the kernel and the global: aot cannot say
what Triton would compile from it, so the builder refuses the spec and the loader leaves the kernel to Triton.
"""

from __future__ import annotations

import builtins
import hashlib
import types as pytypes
from typing import Any

from ...core.errors import AotError
from ...core.keyschemas import SCHEMAS
from .numba_digest import Memo

#: The schema of the digest: another walk is another digest (its version: :data:`aot.core.keyschemas.SCHEMAS`,
#: recorded in each manifest; a set another version made is said as such at attach).
SCHEMA = f"aot-triton-digest-v{SCHEMAS['triton_digest']}\0".encode()
#: Modules whose objects are keyed by qualified name: Triton (its build is in the spec) and Python's own.
_BY_NAME = frozenset({"triton", "math", "cmath", "operator", "_operator", "builtins", "copy"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_MAX_DEPTH = 32
_MISSING = object()


def is_triton_jit(value: Any) -> bool:
    """A Triton ``JITCallable`` (``@triton.jit`` kernel or helper, ``tl.constexpr_function``), without importing
    Triton: its class is Triton's and it wraps a Python function as ``fn``."""
    return (_top(type(value).__module__) == "triton" and hasattr(value, "cache_key")
            and isinstance(getattr(value, "fn", None), pytypes.FunctionType))


def kernel_digest(jitfn: Any, memo: Memo | None = None) -> str:
    """sha256 of what Triton compiles into ``jitfn``'s kernel (the module docstring says what and how). Raises
    :class:`~aot.core.errors.AotError` naming the kernel and the value it cannot key."""
    return _Walk(jitfn, memo or Memo()).digest


class _Walk:
    def __init__(self, jitfn: Any, memo: Memo):
        self.memo = memo
        self.h = hashlib.sha256(SCHEMA)
        self.seen: set[int] = set()
        fn = jitfn.fn
        self.name = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}"
        self.jit(jitfn, fn.__name__)
        self.digest = self.h.hexdigest()

    def put(self, label: str, data: str | bytes) -> None:
        raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
        tag = label.encode("utf-8", "surrogatepass")
        self.h.update(len(tag).to_bytes(4, "little") + tag + len(raw).to_bytes(8, "little") + raw)

    def refuse(self, where: str, why: str) -> None:
        raise AotError(f"{self.name}: {where} {why}; aot keys a Triton kernel by the values Triton compiles into it, "
                       f"so it does not ship one whose values it cannot key")

    def jit(self, value: Any, where: str) -> None:
        self.put(f"{where}#jit", f"{type(value).__name__} noinline={getattr(value, 'noinline', None)!r}")
        self.function(value.fn, where)

    def function(self, fn: Any, label: str) -> None:
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        try:
            self.put(label, self.memo.source(fn))
        except (OSError, TypeError) as e:
            self.refuse(label, f"has no readable source ({e})")
        for attr in ("__defaults__", "__kwdefaults__"):
            default = getattr(fn, attr, None)
            if default:
                self.put(f"{label}#{attr.strip('_')}", self.token(default, label, 0))
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        cells = dict(zip(code.co_freevars, fn.__closure__ or (), strict=False))
        fn_globals = getattr(fn, "__globals__", {})
        fn_builtins = fn_globals.get("__builtins__", builtins)
        done: set[tuple[str, ...]] = set()
        for kind, name, attrs in self.memo.reads_of(code):
            if kind == "LOAD_DEREF":
                if name not in cells:
                    continue
                try:
                    value = cells[name].cell_contents
                except ValueError:
                    value = _MISSING
            elif name in fn_globals:
                value = fn_globals[name]
            else:
                value = (fn_builtins.get(name, _MISSING) if isinstance(fn_builtins, dict)
                         else getattr(fn_builtins, name, _MISSING))
            chain = [name]
            for attr in attrs:  # Triton's code generator resolves getattr on a module to the attribute's value
                if not isinstance(value, pytypes.ModuleType):
                    break
                value = getattr(value, attr, _MISSING)
                chain.append(attr)
            key = (kind, *chain)
            if key in done:
                continue
            done.add(key)
            where = f"{label}/{'.'.join(chain)}"
            self.put(where, b"unbound" if value is _MISSING else self.token(value, where, 0))

    def token(self, value: Any, where: str, depth: int) -> bytes:
        """``value`` as bytes that are equal exactly when Triton would compile the same (see the module doc)."""
        if depth > _MAX_DEPTH:
            self.refuse(where, f"nests values more than {_MAX_DEPTH} deep")
        cls = type(value)
        if cls in _SCALARS:
            return f"{cls.__name__} {value!r}".encode()
        if isinstance(value, (tuple, list)):
            parts = [self.token(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
            head = f"{cls.__module__}.{cls.__qualname__} {getattr(value, '_fields', '')} {len(parts)}".encode()
            return head + b"".join(len(p).to_bytes(8, "little") + p for p in parts)
        if is_triton_jit(value):
            if _top(value.fn.__module__) == "triton":  # Triton's own helpers: its build is in the spec
                return f"triton {value.fn.__module__}.{value.fn.__qualname__}".encode()
            self.jit(value, where)
            return f"jit {value.fn.__module__}.{value.fn.__qualname__}".encode()
        if _top(cls.__module__) == "triton" and cls.__name__ == "constexpr":
            return b"constexpr " + self.token(getattr(value, "value", None), where, depth + 1)
        if _top(cls.__module__) == "triton" and isinstance(value, _dtype_classes()):
            return f"{cls.__name__} {value}".encode()
        if isinstance(value, pytypes.ModuleType):
            return f"module {value.__name__}".encode()
        if isinstance(value, pytypes.FunctionType) and _top(value.__module__) not in _BY_NAME:
            self.function(value, where)
            return f"function {value.__module__}.{value.__qualname__}".encode()
        if isinstance(value, type):
            if getattr(value, "__triton_aggregate__", False):  # its methods are compiled: key its source
                try:
                    self.put(where, self.memo.source(value))
                except (OSError, TypeError) as e:
                    self.refuse(where, f"is a Triton aggregate without readable source ({e})")
            return f"class {value.__module__}.{value.__qualname__}".encode()
        home = getattr(value, "__module__", None)
        home = home if isinstance(home, str) else cls.__module__
        if _top(cls.__module__) in _BY_NAME and _top(home) in _BY_NAME:
            name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
            text = f"{cls.__module__}.{cls.__qualname__} {home}.{name}" if isinstance(name, str) else repr(value)
            if " at 0x" not in text:
                return text.encode()
        self.refuse(where, f"is a {cls.__module__}.{cls.__qualname__} object, which Triton may compile in by value")
        return b""


def _dtype_classes() -> tuple[type, ...]:
    import sys
    core = sys.modules.get("triton.language.core")  # imported: the value is one of its objects
    return (core.dtype,) if core is not None else ()


def _top(module: Any) -> str:
    return module.partition(".")[0] if isinstance(module, str) else ""


def jit_function(value: Any) -> Any:
    """The ``JITFunction`` a matrix or a manifest names (inside an ``@triton.autotune`` or ``@triton.heuristics``
    wrapper: the inner kernel, whose code the wrappers launch with their configs' values), or :class:`AotError`."""
    for _ in range(8):
        if type(value).__name__ not in ("Autotuner", "Heuristics"):
            break
        value = getattr(value, "fn", None)
    if not (is_triton_jit(value) and hasattr(value, "run") and hasattr(value, "params")):
        raise AotError(f"is a {type(value).__module__}.{type(value).__qualname__}, not a @triton.jit kernel")
    return value


def autotune_configs(value: Any) -> list[Any] | None:
    """The ``triton.Config`` list of an ``@triton.autotune`` kernel (outermost first), ``None`` for another."""
    for _ in range(8):
        if type(value).__name__ == "Autotuner":
            return list(value.configs)
        if type(value).__name__ != "Heuristics":
            return None
        value = getattr(value, "fn", None)
    return None
