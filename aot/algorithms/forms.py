"""The forms a spec's sequences, state and operators may take, as data: iterator nodes, state fields, C++
operators. One schema, read by the validator (:mod:`aot.core.formrules` through :mod:`aot.core.rules`),
the builder (:mod:`aot.build.compile`, with placeholders), the runtime binder (:mod:`aot.runtime.loader.binder`,
with the caller's arrays) and the checks (:mod:`aot.verify.forms`, with numpy arrays).

A node as a definition stores it (already validated) is a word (``"array"``, ``"counting"``,
``"constant"``, ``"shuffle"``, ``"discard"``) or a one-kind mapping (``{"array": "int32"}``,
``{"transform": OP, "over": NODE}``, ``{"zip": [NODE, ...]}``, ``{"permutation": NODE, "indices": NODE}``,
``{"reverse": NODE}``, ``{"cache_modified": NODE, "modifier": "stream"}``). :func:`tree` turns it into a
:class:`Node` whose every element type is resolved, so nobody else has to know the defaults.

Pure Python, stdlib only: the runtime reads these tables cheaply.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

#: Kinds with no children: each takes one value from the caller (``discard`` none).
LEAVES = ("array", "counting", "constant", "shuffle", "discard")
#: Kinds wrapping other nodes.
COMPOSITES = ("transform", "zip", "permutation", "reverse", "cache_modified")
KINDS = LEAVES + COMPOSITES
#: What each direction may hold (cuda.compute 1.2.1: these iterators read, these write).
INPUT_KINDS = ("array", "counting", "constant", "shuffle", "transform", "zip", "permutation", "reverse",
               "cache_modified")
OUTPUT_KINDS = ("array", "discard", "transform", "reverse")
#: Leaves with an element type of their own that must be an integer.
INTEGER_LEAVES = ("counting", "shuffle")
CACHE_MODIFIERS = ("stream", "global", "volatile")
#: The extra keys a composite kind's mapping may hold, and their defaults.
EXTRA_KEYS: Mapping[str, Mapping[str, Any]] = {
    "transform": {"over": "array"}, "permutation": {"indices": {"array": "int64"}},
    "cache_modified": {"modifier": "stream"}, "zip": {}, "reverse": {}}
MAX_DEPTH = 4
MAX_ZIP = 8


@dataclass(frozen=True)
class Seq:
    """One sequence argument an algorithm takes that may be an iterator: the spec ``field`` describing it,
    the call ``keyword``, the field naming its element type (``dtype_field``, its fallback ``dtype_default``
    when that field is ``None``), and its direction."""

    field: str
    keyword: str
    dtype_field: str = "dtype"
    output: bool = False
    dtype_default: str = "dtype"

    def dtype(self, p: Mapping[str, Any]) -> str:
        return p.get(self.dtype_field) or p[self.dtype_default]


@dataclass(frozen=True)
class Node:
    """A resolved iterator node: its ``kind``, element type ``dtype`` (a scalar dtype name or a struct type's
    name), children, and for ``transform`` its operator, for ``cache_modified`` its modifier."""

    kind: str
    dtype: str
    children: tuple[Node, ...] = ()
    op: Any = None
    modifier: str | None = None


def needs_binding(p: Mapping[str, Any], seqs: tuple[Seq, ...]) -> bool:
    """Whether a spec's loaded object binds arguments per call: it declares state or takes an iterator."""
    return "state" in p or any(p.get(s.field, "array") != "array" for s in seqs)


def kind_of(raw: Any) -> str:
    """The kind of a (valid) stored node."""
    return raw if isinstance(raw, str) else next(k for k in raw if k in KINDS)


def tree(raw: Any, dtype: str, types: Mapping[str, Any] | None = None) -> Node:
    """The resolved :class:`Node` of a validated stored node whose elements are ``dtype``."""
    kind = kind_of(raw)
    if kind in LEAVES:
        own = raw[kind] if isinstance(raw, dict) and raw.get(kind) else None
        return Node(kind, own or ("int64" if kind == "shuffle" else dtype))
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {kind: None}
    if kind == "transform":
        over = spec.get("over", "array")
        return Node(kind, dtype, (tree(over, _own_dtype(over) or dtype, types),), op=spec["transform"])
    if kind == "zip":
        fields = (types or {}).get(dtype, ())
        members = spec["zip"]
        return Node(kind, dtype, tuple(tree(m, fields[i][1] if i < len(fields) else dtype, types)
                                       for i, m in enumerate(members)))
    if kind == "permutation":
        indices = spec.get("indices", {"array": "int64"})
        return Node(kind, dtype, (tree(spec["permutation"], dtype, types),
                                  tree(indices, _own_dtype(indices) or "int64", types)))
    if kind == "cache_modified":
        return Node(kind, dtype, (tree(spec["cache_modified"], dtype, types),), modifier=spec.get("modifier", "stream"))
    return Node(kind, dtype, (tree(spec["reverse"], dtype, types),))  # reverse


def _own_dtype(raw: Any) -> str | None:
    """The element type a leaf names itself (``{"array": "int32"}``), else ``None``."""
    if isinstance(raw, dict):
        kind = kind_of(raw)
        if kind in LEAVES and isinstance(raw.get(kind), str):
            return raw[kind]
    return None


def leaves(node: Node) -> Iterator[Node]:
    """The node's leaves that take a value from the caller, depth first (``discard`` takes none)."""
    if node.kind in LEAVES:
        if node.kind != "discard":
            yield node
        return
    for child in node.children:
        yield from leaves(child)


def operators(node: Node) -> Iterator[Any]:
    """Every operator inside a node (its transforms), depth first."""
    if node.op is not None:
        yield node.op
    for child in node.children:
        yield from operators(child)


# ------------------------------------------------------------------------------- state
@dataclass(frozen=True)
class StateField:
    """One declared state field: a device array of ``dtype`` (passed as its data pointer) or a scalar
    passed by value."""

    name: str
    dtype: str
    array: bool

    @property
    def declaration(self) -> str:
        return f"{self.dtype}[]" if self.array else self.dtype


#: struct format characters of the scalar dtypes (a state struct is laid out as C lays it out).
_FORMAT = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H", "uint32": "I",
           "uint64": "Q", "float32": "f", "float64": "d", "bool": "?"}


def state_fields(stored: Any) -> tuple[StateField, ...]:
    """The state fields of a validated definition's ``state`` (``[[name, "uint8[]"], ...]``)."""
    out = []
    for name, decl in stored or ():
        array = decl.endswith("[]")
        out.append(StateField(name, decl[:-2] if array else decl, array))
    return tuple(out)


def state_format(fields: tuple[StateField, ...]) -> str:
    """The ``struct`` format of a state struct: arrays as pointers, scalars by value, C alignment (native
    mode ``@``: the platform's pointer size and alignment, the same as the device's on 64-bit hosts)."""
    return "@" + "".join("P" if f.array else _FORMAT[f.dtype] for f in fields)


def state_alignment(fields: tuple[StateField, ...]) -> int:
    """The state struct's alignment: its largest member's."""
    return max((struct.calcsize("@" + ("P" if f.array else _FORMAT[f.dtype])) for f in fields), default=1)


def pack_state(fields: tuple[StateField, ...], values: tuple[Any, ...]) -> bytes:
    """The state struct's bytes (``values``: an address per array, a Python number per scalar), padded to
    its alignment as a C struct is."""
    if not fields:
        return b""
    data = struct.pack(state_format(fields), *values)
    align = state_alignment(fields)
    return data + b"\0" * (-len(data) % align)


# ------------------------------------------------------------------------------- C++ operators
def is_cpp(op: Any) -> bool:
    """Whether an operator is a C++ operator (``{"cpp": FILE, "function": NAME, ...}``)."""
    return isinstance(op, dict) and "cpp" in op
