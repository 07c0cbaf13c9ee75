"""Build-time makers for the forms of :mod:`aot.algorithms.forms`: stateful Python operators, C++
operators (``RawOp``, compiled with NVRTC), and iterator arguments over placeholders.

State is bound to never-dereferenced placeholders: cuda.compute reads a data pointer where it builds a
``PointerIterator`` or packs a captured array, but the address enters no compiled code (the blob keeps
the state's size only; the caller's state is read at each call). The placeholder is
``cccl_patches.placeholder_array`` (with its evidence there).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Mapping

from cccl_patches import PLACEHOLDER_ADDRESS, placeholder_array

from ..algorithms.forms import Node, StateField, pack_state, state_alignment, tree
from ..core.errors import without_frames
from ..core.oplang import is_code_ref, op_state


def lambda_function(source: str, arrays: tuple[str, ...] = ()):
    """A vetted lambda as a named ``def`` whose source :mod:`inspect` finds (cuda.compute rewrites a stateful
    operator's source to take its state as parameters); its name hashes the text, so builds agree."""
    import ast
    import linecache
    from ..core.oplang import lambda_problem
    problem = lambda_problem(source, arrays)
    if problem:
        raise ValueError(f"refusing operator {source!r}: {problem}")
    lam = ast.parse(source.strip(), mode="eval").body
    assert isinstance(lam, ast.Lambda)
    name = "aot_op_" + hashlib.sha256(source.strip().encode()).hexdigest()[:16]
    args = ", ".join(a.arg for a in lam.args.args)
    text = f"def {name}({args}):\n    return {ast.unparse(lam.body)}\n"
    filename = f"<aot-op-{name}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(text, filename, "exec"), {"__builtins__": {}}, namespace)  # noqa: S102 - vetted above
    return namespace[name]


def stateful(fn: Callable[..., Any], fields: tuple[StateField, ...]):
    """cuda.compute's stateful operator for ``fn`` reading the arrays ``fields``, in that order (the
    order the binder packs them in), bound to placeholders."""
    from cuda.compute._jit import _JitOpState, _StatefulOp
    arrays = [placeholder_array(f.dtype) for f in fields]
    return _StatefulOp(fn, _JitOpState([f.name for f in fields], arrays))


def cpp_op(op: Mapping[str, Any], fields: tuple[StateField, ...], sources: Mapping[str, str], sm: int | None):
    """A C++ operator as a ``RawOp``: its source compiled to LTO-IR by NVRTC for ``sm`` (None: the current
    device), its state a placeholder struct of the declared layout."""
    from cuda.compute._cpp_compile import compile_cpp_to_ltoir
    from cuda.compute.op import RawOp
    try:
        ltoir = compile_cpp_to_ltoir(sources[op["cpp"]], arch=f"sm_{sm}" if sm else None)
    except Exception as e:  # noqa: BLE001 - its traceback holds cuda.compute's failed Program: dropped
        raise without_frames(e) from None  # (see aot.build.compile.compile_program)
    state = pack_state(fields, tuple(PLACEHOLDER_ADDRESS if f.array else 0 for f in fields))
    return RawOp(ltoir=ltoir, name=op["function"], state=state, state_alignment=state_alignment(fields))


def operator_for(op: Any, fields: tuple[StateField, ...], sources: Mapping[str, str], sm: int | None,
                 plain: Callable[[str], Any]):
    """A spec's operator as the factory takes it: ``plain(op)`` for one without state (built-in, lambda,
    code), a stateful adapter for a Python operator with state, a ``RawOp`` for a C++ operator."""
    if isinstance(op, dict):
        return cpp_op(op, op_state(op, fields), sources, sm)
    used = op_state(op, fields)
    if not used:
        return plain(op)
    if is_code_ref(op):
        from ..core.opref import resolve
        fn = resolve(op)
        _refuse_length_reads(op, fn, used)
        return stateful(fn, used)
    return stateful(lambda_function(op, tuple(f.name for f in used)), used)


def _refuse_length_reads(ref: str, fn: Callable[..., Any], fields: tuple[StateField, ...]) -> None:
    """An operator from code must not read a state array's length or shape: it is compiled against a
    placeholder (the caller's array has any length), so ``len(flags)`` would be a wrong constant."""
    import ast
    import inspect
    import textwrap
    names = {f.name for f in fields}
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    for node in ast.walk(tree):
        bad = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"
               and any(isinstance(a, ast.Name) and a.id in names for a in node.args)) or \
              (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names
               and node.attr in ("shape", "size", "ndim", "strides", "nbytes"))
        if bad:
            raise ValueError(f"operator {ref!r} reads the length or shape of a state array ({ast.unparse(node)}); "
                             f"aot compiles it for any length: pass the length as state or index within it")


def iterator_arg(raw: Any, dtype: str, types: Mapping[str, Any], output: bool, op_for: Callable[[Any], Any]):
    """The iterator a stored node describes, over placeholders (each leaf's runtime values are bound at
    call time by :mod:`aot.runtime.loader.binder`)."""
    import cuda.compute as cc
    from ..algorithms import np_dtype
    from ..runtime.loader.binder import discard, make_iterator, np_scalar

    def leaf(node: Node):
        if node.kind == "array":
            return placeholder_array(np_dtype(node.dtype, types))
        if node.kind == "counting":
            return cc.CountingIterator(np_scalar(node.dtype, 0))
        if node.kind == "constant":
            return cc.ConstantIterator(np_scalar(node.dtype, 0))
        if node.kind == "shuffle":
            return cc.ShuffleIterator(1, 0)
        return discard(node.dtype)

    return make_iterator(tree(raw, dtype, types), leaf, op_for, output, types)
