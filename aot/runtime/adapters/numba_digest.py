"""The digest of a numba-cuda kernel: what numba-cuda freezes into its code, so an edit to any of it is another
content key at build and a refused attach at load (:mod:`aot.runtime.adapters.numba_attach`).

numba-cuda compiles a kernel from its bytecode and the *values* its globals and closure cells hold when it
compiles (its interpreter turns ``LOAD_GLOBAL``/``LOAD_DEREF`` into ``ir.Global``/``ir.FreeVar`` holding the value,
and ``getattr`` on a module into that attribute's value): ``cfg.TPB``, ``np.float32(2.5)``, a numpy array, a
nested tuple and ``helpers.dev`` (a device function reached through its module) all become constants or callees
of the code. Its own disk cache keys on the bytecode and the closure's cells only (``_CacheImpl._index_key``), so
it misses them; this digest reads what the kernel reads, the way numba's interpreter does:

* each function's source, its defaults, and every global or closure name its bytecode loads (nested code
  included), followed through ``module.attr`` chains to the value numba sees;
* each value by content: ``None``/bool/int/float/complex/str/bytes by type and ``repr``; tuples and lists
  element by element (nested); numpy scalars by dtype and bytes; numpy arrays by dtype, shape, order and bytes;
  enum members and enum classes by their members; a ``@cuda.jit`` device function (or any numba dispatcher) by
  the options that change its code and its own digest, recursively; a plain Python function likewise
  (``register_jitable``);
* what numba-cuda types through its registries rather than the kernel's names (:mod:`.numba_overloads`): the
  library's ``@overload`` templates of a value the kernel reaches, its ``@overload_method``/``@overload_attribute``
  templates of an attribute name the code loads, its operator overloads (of a package the kernel reads from) and its
  IR rewrites, each by the overload function's digest and options; a typing template it cannot key is refused;
* numba, numpy, ``math`` and builtins objects (``cuda.grid``, ``np.float32``, ``math.sqrt``, ``float32``) by
  their name (numba's by package and name: its module layout moves between releases): their code is the installed
  numba-cuda's, whose version the spec records.

Anything else (an instance of a class of the library's own, an object whose ``repr`` names its address) is
refused (:class:`~aot.core.errors.AotError` naming the kernel and the global): aot cannot say whether numba
would compile it the same, so the builder refuses the spec and the loader leaves the kernel to numba-cuda's JIT.

The walk is Python-version independent (names and values, not opcodes): a digest made by a 3.11 build host
equals one made by a 3.12 runtime. It runs once per kernel at attach (about a millisecond: reading the source)
and again, values only (:class:`Memo`), when numba-cuda would compile a packaged signature; never per launch.
"""

from __future__ import annotations

import builtins
import dis
import enum
import hashlib
import inspect
import sys
import types as pytypes
from typing import Any, Iterator

from ...core.env import DEBUG_DIGEST
from ...core.errors import AotError
from ...core.keyschemas import SCHEMAS
from . import numba_overloads

#: The schema of the digest: another walk is another digest (its version: :data:`aot.core.keyschemas.SCHEMAS`,
#: recorded in every manifest, so a set built by another walk is said as such at attach).
SCHEMA = f"aot-numba-digest-v{SCHEMAS['numba_digest']}\0".encode()
#: Modules whose objects are keyed by qualified name: numba-cuda (its version is in the spec), numpy's types
#: and functions (numba-cuda's lowering implements them), Python's own.
_BY_NAME = frozenset({"numba", "numba_cuda", "llvmlite", "numpy", "math", "cmath", "operator", "_operator",
                      "builtins"})
_NUMBA = frozenset({"numba", "numba_cuda", "llvmlite"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_NAME"})
_ATTRS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_MAX_DEPTH = 32
_MISSING = object()
#: A device function's options that do not change its code: ``CUDADispatcher.compile_device`` reads debug,
#: lineinfo, forceinline, inline, fastmath and opt (0.23.0 to 0.30.4), never ``lto`` (numba-cuda sets it from
#: nvJitLink's presence; only the kernel's library links with it, and aot builds the kernel's cubin itself), nor
#: the kernel-only ``launch_bounds``, ``extensions``, ``shared_memory_carveout``, nor ``cache``. Any other option
#: is keyed.
_NO_CODE_OPTIONS = frozenset({"lto", "cache", "launch_bounds", "extensions", "shared_memory_carveout"})


class _Refused(AotError):
    """A value the digest cannot key (raised with the path of names that reached it)."""


class Memo:
    """What does not change while a process runs, kept from one digest of a kernel to the next: each function's
    source text and the names its bytecode loads (the code objects are held, so their ids stay theirs). With it,
    a digest again reads only the values (microseconds): :mod:`aot.runtime.adapters.numba_attach` takes one at
    attach and again when numba-cuda would compile (a value assigned after attach is seen)."""

    def __init__(self) -> None:
        self.sources: dict[int, tuple[Any, str]] = {}
        self.reads: dict[int, tuple[Any, list[tuple[str, str, tuple[str, ...]]]]] = {}
        self.attrs: dict[int, tuple[Any, frozenset[str]]] = {}

    def source(self, fn: Any) -> str:
        got = self.sources.get(id(fn))
        if got is None or got[0] is not fn:
            got = self.sources[id(fn)] = (fn, inspect.getsource(fn))
        return got[1]

    def reads_of(self, code: pytypes.CodeType) -> list[tuple[str, str, tuple[str, ...]]]:
        got = self.reads.get(id(code))
        if got is None or got[0] is not code:
            got = self.reads[id(code)] = (code, sorted(set(_reads(code))))
        return got[1]

    def attrs_of(self, code: pytypes.CodeType) -> frozenset[str]:
        got = self.attrs.get(id(code))
        if got is None or got[0] is not code:
            got = self.attrs[id(code)] = (code, frozenset(_attribute_names(code)))
        return got[1]


def kernel_digest(dispatcher: Any, memo: Memo | None = None) -> str:
    """sha256 of what numba-cuda compiles into ``dispatcher``'s kernel (the module docstring says what and how).
    Raises :class:`~aot.core.errors.AotError` naming the kernel and the global it cannot key. ``memo``: sources
    and bytecode reads kept from an earlier digest of the same kernel in this process."""
    _load_extensions()
    return _Walk(dispatcher, memo=memo).digest


def _load_extensions() -> None:
    """Run numba-cuda's extension entry points (``numba_cuda_extensions``/``numba_extensions``: templates and
    rewrites installed packages register) now, as its first compile of any kernel would: a digest taken before
    them (at attach, at the build's matrix read) and one after (the recheck at compile) then see the same
    registries. Once per process; a numba-cuda without them has none."""
    try:
        from numba.cuda.core import entrypoints
    except ImportError:
        return
    entrypoints.init_all()


def device_functions(dispatcher: Any) -> list[Any]:
    """The numba dispatchers (``@cuda.jit(device=True)`` functions) a kernel reaches, through its globals, its
    closure and ``module.attr`` chains, transitively: the builder recompiles them per SM."""
    return _Walk(dispatcher, keyed=False).dispatchers


def is_dispatcher_like(value: Any) -> bool:
    """A numba dispatcher (``@cuda.jit`` device function, ``@numba.jit``): a ``py_func`` and ``targetoptions``."""
    try:
        return isinstance(getattr(value, "py_func", None), pytypes.FunctionType) and hasattr(value, "targetoptions")
    except Exception:  # noqa: BLE001 - an object whose attribute access fails is no dispatcher
        return False


class _Walk:
    """One walk from a kernel: its digest and the dispatchers it reached (``keyed=False``: no values refused,
    only the callees collected)."""

    def __init__(self, dispatcher: Any, keyed: bool = True, memo: Memo | None = None):
        self.keyed = keyed
        self.memo = Memo() if memo is None else memo
        self.h = hashlib.sha256(SCHEMA)
        self.items: list[str] | None = [] if DEBUG_DIGEST.get() is not None else None
        self.seen: set[int] = set()
        self.dispatchers: list[Any] = []
        self.quiet = 0  # > 0: inside numba-cuda's own functions, walked for their callees only
        self.attrs: set[str] = set()  # every attribute name the walked code loads (x.m: an @overload_method)
        self.packages: set[str] = set()  # the top-level packages of the functions walked
        root = dispatcher.py_func
        self.name = f"{getattr(root, '__module__', '?')}:{getattr(root, '__qualname__', '?')}"
        self.function(root, root.__name__)
        self.beyond(dispatcher)
        self.digest = self.h.hexdigest()
        if self.items is not None and keyed:
            _debug_write(self.name, self.digest, self.items)

    def beyond(self, dispatcher: Any) -> None:
        """What numba-cuda compiles in that no name of the kernel's reaches: the library's templates for
        operators and for the attribute names its code loads (until no new name comes), its IR rewrites, and
        the dispatcher's compiler pipeline (:mod:`.numba_overloads`)."""
        for op, ext in numba_overloads.operator_templates():
            if _top(ext.label) in self.packages:  # a package's operators serve its own types: one the kernel reads
                self.extension(ext, f"operator {op}")
        done: set[str] = set()
        while self.attrs - done:
            names = self.attrs - done
            done |= names
            for attr, ext in numba_overloads.attribute_templates(names):
                self.extension(ext, f".{attr}")
        for cls in numba_overloads.library_rewrites():
            self.put("rewrite", f"{cls.__module__}.{cls.__qualname__}")
            for name, fn in numba_overloads.class_functions(cls):
                self.function(fn, f"rewrite {cls.__qualname__}.{name}")
        pipeline = getattr(getattr(dispatcher, "_compiler", None), "pipeline_class", None)
        if pipeline is not None and _top(getattr(pipeline, "__module__", None)) not in _BY_NAME:
            self.refuse("its compiler pipeline", f"is {pipeline.__module__}.{pipeline.__qualname__}, not "
                                                 f"numba-cuda's own")

    def extension(self, ext: Any, where: str) -> None:
        """A library's template numba-cuda types a call, method or attribute with: an ``@overload`` by its
        function (source, defaults, what it reads: the implementation it returns is nested in it or read by it)
        and options, an ``@intrinsic`` by its function; another (``@type_callable`` with ``@lower_builtin``, an
        attribute template class) is refused: aot cannot see what numba-cuda lowers for it."""
        label = f"{where}@{ext.kind} {ext.label}"
        if ext.kind == "opaque":
            self.refuse(where, f"is typed by {ext.label}, a numba typing template aot cannot key (only @overload, "
                               f"@overload_method, @overload_attribute and @intrinsic are)")
            return
        self.put(label, ext.options)
        self.function(ext.fn, label)
        if ext.inline is not None:
            self.function(ext.inline, f"{label}#inline")

    def put(self, label: str, text: str | bytes) -> None:
        if self.quiet:
            return
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        tag = label.encode("utf-8", "surrogatepass")
        self.h.update(len(tag).to_bytes(4, "little") + tag + len(data).to_bytes(8, "little") + data)
        if self.items is not None:
            self.items.append(f"{label}\t{hashlib.sha256(data).hexdigest()[:16]}\t{data[:160]!r}")

    def refuse(self, where: str, why: str) -> None:
        if self.keyed and not self.quiet:
            raise _Refused(f"{self.name}: {where} {why}; aot keys a numba kernel by the values numba-cuda compiles "
                           f"into it, so it does not ship one whose values it cannot key")

    def function(self, fn: Any, label: str) -> None:
        """A Python function numba compiles: its source, defaults, and the values of the names it loads."""
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        try:
            self.put(label, self.memo.source(fn))
        except (OSError, TypeError) as e:
            if self.keyed and not self.quiet:
                raise _Refused(f"{self.name}: {label}: its source cannot be read ({e}); aot keys numba kernels by "
                               f"it") from None
        for attr in ("__defaults__", "__kwdefaults__"):
            default = getattr(fn, attr, None)
            if default:
                self.value(default, f"{label}#{attr.strip('_')}")
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        fn_globals = getattr(fn, "__globals__", {})
        if not self.quiet:
            self.attrs |= self.memo.attrs_of(code)
            self.packages.add(_top(fn_globals.get("__name__")))
        cells = dict(zip(code.co_freevars, fn.__closure__ or (), strict=False))
        fn_builtins = fn_globals.get("__builtins__", builtins)
        done: set[tuple[str, ...]] = set()
        for kind, name, attrs in self.memo.reads_of(code):
            if kind == "LOAD_DEREF":
                if name not in cells:
                    continue  # a local the function's own inner code shares, not a closure of this function
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
            for attr in attrs:  # numba resolves getattr on a module to the attribute's value
                if not isinstance(value, pytypes.ModuleType):
                    break
                value = getattr(value, attr, _MISSING)
                chain.append(attr)
            key = (kind, *chain)
            if key in done:
                continue
            done.add(key)
            where = f"{label}/{'.'.join(chain)}"
            if value is _MISSING:
                self.put(where, "unbound")  # numba-cuda refuses to compile it; an edit that binds it is another key
            else:
                self.value(value, where)

    def value(self, value: Any, where: str) -> None:
        self.put(where, self.token(value, where, 0))

    def overloads(self, value: Any, where: str) -> None:
        """The library's ``@overload`` (or other typing) templates registered for ``value``."""
        if self.quiet:
            return
        for ext in numba_overloads.templates_for(value):
            self.extension(ext, where)

    def token(self, value: Any, where: str, depth: int) -> bytes:
        """``value`` as bytes that equal exactly when numba-cuda would compile the same (see the module doc)."""
        if depth > _MAX_DEPTH:
            self.refuse(where, f"nests values more than {_MAX_DEPTH} deep")
            return b"deep"
        np = sys.modules.get("numpy")  # no numpy imported: no value can be a numpy object
        if np is not None and isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                self.refuse(where, "is a numpy array of Python objects")
                return b"object array"
            order = "C" if value.flags.c_contiguous else "F" if value.flags.f_contiguous else "A"
            return (f"ndarray {_dtype(value.dtype)} {value.shape} {order} ".encode()
                    + hashlib.sha256(np.ascontiguousarray(value).tobytes()).digest())
        if np is not None and isinstance(value, np.generic):
            if value.dtype.hasobject:
                self.refuse(where, "is a numpy object scalar")
                return b"object"
            return f"numpy {_dtype(value.dtype)} ".encode() + value.tobytes()
        if np is not None and isinstance(value, np.dtype):
            return f"dtype {_dtype(value)}".encode()
        if isinstance(value, enum.Enum):
            kind = type(value)
            return (f"enum {kind.__module__}.{kind.__qualname__}.{value.name} ".encode()
                    + self.token(value.value, where, depth + 1))
        if type(value) in _SCALARS:
            return f"{type(value).__name__} {value!r}".encode()
        self.overloads(value, where)
        if isinstance(value, (tuple, list)):
            cls = type(value)
            parts = [self.token(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
            head = f"{cls.__module__}.{cls.__qualname__} {getattr(value, '_fields', '')} {len(parts)}".encode()
            return head + b"".join(len(p).to_bytes(8, "little") + p for p in parts)
        if is_dispatcher_like(value):
            options = repr(sorted((str(k), repr(_option(v))) for k, v in dict(value.targetoptions).items()
                                  if _option(v) is not None and str(k) not in _NO_CODE_OPTIONS))
            if " at 0x" in options:
                self.refuse(where, "is a numba function whose options name objects by address")
            if all(d is not value for d in self.dispatchers):
                self.dispatchers.append(value)
            fn = value.py_func
            if _top(fn.__module__) in _BY_NAME:  # numba-cuda's own (cuda.random): its callees, not its values
                self.quiet += 1
                try:
                    self.function(fn, where)
                finally:
                    self.quiet -= 1
                return f"dispatcher {_where(fn.__module__)}.{fn.__qualname__}".encode()
            self.function(fn, where)
            return f"dispatcher {options}".encode()
        if isinstance(value, pytypes.FunctionType) and _top(value.__module__) not in _BY_NAME:
            self.function(value, where)
            return f"function {value.__module__}.{value.__qualname__}".encode()
        if isinstance(value, pytypes.ModuleType):
            return f"module {value.__name__}".encode()
        if isinstance(value, type) and issubclass(value, enum.Enum):
            members = [(m.name, self.token(m.value, f"{where}.{m.name}", depth + 1)) for m in value]
            return (f"enum class {value.__module__}.{value.__qualname__} ".encode()
                    + b"".join(n.encode() + b"=" + len(t).to_bytes(8, "little") + t for n, t in members))
        defn = getattr(value, "_defn", None)  # a numba @intrinsic of the library's own: key its code
        if isinstance(defn, pytypes.FunctionType) and _top(defn.__module__) not in _BY_NAME:
            self.function(defn, where)
            return f"intrinsic {defn.__module__}.{defn.__qualname__}".encode()
        if isinstance(value, type):
            return f"class {_where(value.__module__)}.{value.__qualname__}".encode()
        return self.named(value, where)

    def named(self, value: Any, where: str) -> bytes:
        """An object of numba, numpy or Python: a function-like one by its qualified name, another (a numba type,
        ``float32``) by its package and ``repr`` (numba's own class layout moves between numba releases, which the
        spec does not record; the type's name does not); else refused."""
        cls = type(value)
        home = getattr(value, "__module__", None)
        home = home if isinstance(home, str) else cls.__module__
        if _top(cls.__module__) in _BY_NAME and _top(home) in _BY_NAME:
            name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
            text = (f"{_where(cls.__module__)}.{cls.__qualname__} {_where(home)}.{name}" if isinstance(name, str)
                    else f"{_top(cls.__module__)} {value!r}")
            if " at 0x" not in text:
                return text.encode()
        self.refuse(where, f"is a {cls.__module__}.{cls.__qualname__} object, which numba-cuda may compile in by "
                           f"value")
        return f"object {cls.__module__}.{cls.__qualname__}".encode()


def _debug_write(name: str, digest: str, items: list[str]) -> None:
    """``AOT_DEBUG_DIGEST=FILE``: append each digest's labelled items to FILE (one line each: label, the item's
    sha256 prefix, its first bytes), to compare a build host's items with a user's item by item."""
    with open(str(DEBUG_DIGEST.get()), "a", encoding="utf-8") as f:
        f.write(f"== {name} {digest}\n" + "".join(f"{i}\n" for i in items))


def _reads(code: pytypes.CodeType) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """``(opcode kind, name, attribute chain)`` for each global or closure name the code (and the code nested in
    it) loads: ``cfg.TPB`` is ``("LOAD_GLOBAL", "cfg", ("TPB",))``. Opcodes differ across Python versions
    (``LOAD_METHOD`` in 3.11, ``LOAD_ATTR`` in 3.12); the names do not."""
    ins = [i for i in dis.get_instructions(code) if i.opname not in ("EXTENDED_ARG", "CACHE", "NOP")]
    for n, i in enumerate(ins):
        if i.opname in _LOADS and isinstance(i.argval, str):
            attrs: list[str] = []
            for j in ins[n + 1:]:
                if j.opname not in _ATTRS or not isinstance(j.argval, str):
                    break
                attrs.append(j.argval)
            kind = "LOAD_DEREF" if i.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") else "LOAD_GLOBAL"
            yield kind, i.argval, tuple(attrs)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            yield from _reads(const)


def _attribute_names(code: pytypes.CodeType) -> Iterator[str]:
    """Every attribute name the code (and the code nested in it) loads, and its string constants
    (``getattr(x, "m")``): the names an ``@overload_method``/``@overload_attribute`` may be reached by."""
    for i in dis.get_instructions(code):
        if i.opname in _ATTRS and isinstance(i.argval, str):
            yield i.argval
    for const in code.co_consts:
        if isinstance(const, str) and const.isidentifier():
            yield const
        elif isinstance(const, pytypes.CodeType):
            yield from _attribute_names(const)


def _dtype(dtype: Any) -> str:
    """A dtype as text that does not change across numpy releases (its ``descr``, byte order included)."""
    return repr(dtype.descr)


def _where(module: Any) -> str:
    """A module's name as a key holds it: numba's and numba-cuda's by their package alone (their inner layout
    moves between releases, which must not make a kernel's digest another; the name read, ``cuda.grid``, is in the
    key's label), any other in full."""
    top = _top(module)
    return top if top in _NUMBA else str(module)


def _top(module: Any) -> str:
    return module.partition(".")[0] if isinstance(module, str) else ""



def _option(value: Any) -> Any:
    """A device function's option as every numba-cuda release spells it: 0.26 added ``shared_memory_carveout:
    None`` and turned ``link=[]`` into ``()``; an unset option (None, an empty list or tuple) is no option, and a
    list is a tuple, so one function gives one digest under every release (a kernel built by one attaches under
    another: cccl_patches/numba_cuda.py RELEASES)."""
    if isinstance(value, (list, tuple)):
        return tuple(value) or None
    return value
