"""The operator language of specs: built-in names, vetted lambdas, operators from code.

Operator lambdas are evaluated (to hand numba a function) when a spec is built, including on an end
user's machine when the loader falls back to JIT from a manifest; so only arithmetic, comparisons and
boolean logic over the lambda's own arguments and numeric constants are allowed, plus a subscript of a
state array the spec declares (``mask[i]``, index arithmetic), and the text is bounded before it is parsed.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ..algorithms import BUILTIN_OPS
from .text import SpecError, _text_problem, hint, short


_SAFE_NODES = ("Subscript", "Expression", "Lambda", "arguments", "arg", "Name", "Load", "Constant", "BinOp", "UnaryOp",
               "Compare", "BoolOp", "IfExp", "Add", "Sub", "Mult", "Div", "FloorDiv", "Mod", "Pow", "BitAnd",
               "BitOr", "BitXor", "LShift", "RShift", "USub", "UAdd", "Not", "Invert", "Eq", "NotEq", "Lt",
               "LtE", "Gt", "GtE", "And", "Or")


# Bounds on what a spec field may hold. Specs come from matrices and from manifests on disk (which the
# loader reads in the host application), so every bound is checked before anything costly (a parse, a
# repr, a file read) happens. Each is far above what a real spec needs.
#: Longest operator lambda (the default matrix's longest is 16 characters).
MAX_LAMBDA_LEN = 1000


#: Most operators, brackets and keywords in one lambda: bounds its parse time and nesting depth, counted
#: on the text before it is parsed (a 1000-character hostile lambda otherwise costs milliseconds to parse).
MAX_LAMBDA_TOKENS = 32


#: Deepest parsed lambda expression (checked again after the parse).
MAX_LAMBDA_DEPTH = 32


_OPERATOR_CHARS = str.maketrans("", "", "-+*/%<>=!&|^~@([{:,")


_KEYWORD = re.compile(r"\b(?:not|and|or|if|else|lambda|is|in)\b")


@functools.lru_cache(maxsize=1024)
def _lambda_check(source: str, arrays: tuple[str, ...] = (), scalars: tuple[str, ...] = ()) -> tuple[int, str | None]:
    """(number of arguments, problem or ``None``) for a lambda source: parsed once per distinct text.
    ``arrays``: the state arrays the spec declares, which the lambda may subscript (and nothing else);
    ``scalars``: scalar state it may name (only a C++ operator's reference, which numba never compiles).

    Bounded before the parse (length, then operators and brackets counted by a regular expression), so
    a hostile manifest cannot make the loader spend seconds or gigabytes in ``ast.parse``; anything the
    parser still refuses (nesting, memory) is a problem, not an exception.
    """
    import ast
    problem = _text_problem(source, MAX_LAMBDA_LEN)
    if problem:
        return 0, f"the lambda {problem}"
    tokens = len(source) - len(source.translate(_OPERATOR_CHARS))  # C speed: no parse, no regex
    if tokens <= MAX_LAMBDA_TOKENS:
        tokens += len(_KEYWORD.findall(source))
    if tokens > MAX_LAMBDA_TOKENS:
        return 0, f"the lambda has {tokens} operators, brackets and keywords, over the limit of {MAX_LAMBDA_TOKENS}"
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as e:
        return 0, f"lambda does not parse: {e.msg}"
    except (RecursionError, MemoryError, ValueError) as e:
        return 0, f"lambda does not parse: {type(e).__name__}"
    if not isinstance(tree.body, ast.Lambda):
        return 0, "the operator source must be a single lambda expression"
    args = tree.body.args
    if args.defaults or args.kw_defaults or args.kwonlyargs or args.vararg or args.kwarg or args.posonlyargs:
        return 0, "lambda parameters must be plain positional names (no defaults, *args, **kwargs or keyword-only)"
    names = [a.arg for a in args.args]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        return 0, f"lambda names the argument {dup!r} twice"
    params = set(names)
    if params & set(arrays + scalars):
        return 0, f"a lambda argument shadows the state field {sorted(params & set(arrays + scalars))[0]!r}"
    subscripted = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript)}
    level: list[ast.AST] = [tree]
    for _ in range(MAX_LAMBDA_DEPTH):  # breadth first, one level at a time: no recursion, bounded depth
        below: list[ast.AST] = []
        for node in level:
            kind = type(node).__name__
            if kind not in _SAFE_NODES:
                return 0, f"lambda uses {kind}; only arithmetic, comparisons and boolean logic are allowed"
            if isinstance(node, ast.Subscript) and not (isinstance(node.value, ast.Name) and node.value.id in arrays):
                return 0, _subscript_problem(node.value, params, arrays, scalars)
            if isinstance(node, ast.Name) and node.id not in params:
                if (node.id in arrays and id(node) in subscripted) or node.id in scalars:
                    pass
                elif node.id in arrays:
                    return 0, f"lambda uses the state array {node.id!r} without subscripting it ({node.id}[i])"
                else:
                    return 0, (f"lambda refers to {node.id!r}{hint(node.id, arrays + scalars)}; only its own "
                               f"arguments, numeric constants and subscripts of declared state arrays are allowed")
            if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
                return 0, f"lambda uses the constant {short(node.value)}; only numbers are allowed"
            below.extend(ast.iter_child_nodes(node))
        if not below:
            return len(names), None
        level = below
    return 0, f"the lambda nests deeper than {MAX_LAMBDA_DEPTH} levels"


def _subscript_problem(value: Any, params: set[str], arrays: tuple[str, ...], scalars: tuple[str, ...]) -> str:
    """Why ``value[...]`` is refused, in the words of the lambda and the state declaration: the name the
    lambda used (``maks``), the declared arrays, and a "did you mean" for a misspelling."""
    import ast
    declared = f"declared state arrays: {', '.join(arrays)}" if arrays else "no state array is declared"
    if not isinstance(value, ast.Name):
        return (f"lambda subscripts {short(ast.unparse(value))}; only a declared state array can be subscripted "
                f"({declared})")
    name = value.id
    if name in params:
        return (f"lambda subscripts its own argument {name!r} ({name}[...]); only a declared state array can be "
                f"({declared})")
    if name in scalars:
        return f"lambda subscripts {name!r}, a scalar state field; declare it as '{name}: <dtype>[]' to read an array"
    if not arrays:
        return f"lambda reads {name}[...], but no state is declared: declare it under 'state:' as '{name}: <dtype>[]'"
    return f"lambda reads {name}[...], but {name!r} is not a declared state array{hint(name, arrays)}; {declared}"


def lambda_problem(source: str, arrays: tuple[str, ...] = (), scalars: tuple[str, ...] = ()) -> str | None:
    """Why ``source`` is not an acceptable operator lambda, or ``None``.

    Operator lambdas are evaluated (to hand numba a function) when a spec is built, including on an end
    user's machine when the loader falls back to JIT from a manifest. Only arithmetic, comparisons and
    boolean logic over the lambda's own (distinct) arguments and numeric constants are allowed: no names,
    calls, attributes or subscripts, so evaluating one cannot run anything else. Length and nesting are
    bounded before the text is parsed.
    """
    if not isinstance(source, str):
        return "the lambda source is not a string"
    problem = _text_problem(source, MAX_LAMBDA_LEN)  # before the cache: it never holds a long text
    return f"the lambda {problem}" if problem else _lambda_check(source, tuple(arrays), tuple(scalars))[1]


@functools.lru_cache(maxsize=1024)
def lambda_names(source: str) -> frozenset[str]:
    """Every name a (vetted) lambda's body mentions: which declared state arrays it reads."""
    import ast
    tree = ast.parse(source.strip(), mode="eval")
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))


def op_state(op: Any, fields: tuple[Any, ...]) -> tuple[Any, ...]:
    """The state fields (:class:`aot.algorithms.forms.StateField`) operator ``op`` receives, in the declared
    order: a lambda, the arrays it mentions; an operator from code or a C++ operator, every declared field;
    a built-in, none. The one rule the builder, the binder and the checks share."""
    if not fields or not isinstance(op, (str, dict)):
        return ()
    if isinstance(op, str) and op.lstrip().startswith("lambda"):
        used = lambda_names(op)
        return tuple(f for f in fields if f.name in used)
    if isinstance(op, dict) or is_code_ref(op):
        return tuple(fields)
    return ()


def code_ref_problem(op: str) -> str | None:
    """Why ``op`` is not an operator-from-code reference ``"pkg.module:function"``, or ``None``."""
    mod, sep, func = op.partition(":")
    if (not sep or len(op) > 256 or not func.isidentifier() or not mod
            or not all(p.isidentifier() for p in mod.split("."))):
        return f"{short(op)} is not a 'package.module:function' reference"
    return None


def is_code_ref(op: Any) -> bool:
    """Whether an operator names a function in code (``"pkg.mod:func"``) rather than a built-in or lambda."""
    return isinstance(op, str) and ":" in op and not op.lstrip().startswith("lambda")


def check_op(value: Any, role: str, arity: int, fld: str = "op", arrays: tuple[str, ...] = (),
             scalars: tuple[str, ...] = ()) -> Any:
    """A built-in operator name, an acceptable lambda taking ``arity`` arguments (stripped; it may subscript
    the state ``arrays``), an operator from code's reference (its shape: the caller resolves it), or a C++
    operator mapping (:func:`check_cpp_op`), else :class:`SpecError` on ``fld``. ``role`` names what the
    operator is for, for messages."""
    if isinstance(value, dict):
        return check_cpp_op(value, role, arity, fld, arrays, scalars)
    if not isinstance(value, str):
        raise SpecError(f"the {role} must be a built-in operator name or a 'lambda ...' source", fld)
    problem = _text_problem(value, MAX_LAMBDA_LEN)
    if problem:
        raise SpecError(f"the {role} {problem}", fld)
    value = value.strip()
    if value.startswith("lambda"):
        n_args, problem = _lambda_check(value, tuple(arrays), tuple(scalars))
        if problem:
            raise SpecError(problem, fld)
        if n_args != arity:
            raise SpecError(f"the {role} lambda takes {n_args} argument(s); this algorithm calls it with "
                            f"{arity}", fld)
        return value
    if is_code_ref(value):
        problem = code_ref_problem(value)
        if problem:
            raise SpecError(problem, fld)
        return value
    if value not in BUILTIN_OPS:
        raise SpecError(f"unknown operator {short(value)}{hint(value, BUILTIN_OPS)}; built-ins: "
                        f"{', '.join(BUILTIN_OPS)}, a 'lambda x: ...' source or a 'package.module:function'", fld)
    return value


#: The keys of a C++ operator mapping.
CPP_KEYS = ("cpp", "function", "reference")


def check_cpp_op(value: dict, role: str, arity: int, fld: str, arrays: tuple[str, ...] = (),
                 scalars: tuple[str, ...] = ()) -> dict:
    """A C++ operator ``{cpp: FILE, function: NAME, reference: OP}``: a relative source path (its text is
    read and recorded by the caller), the ``extern "C"`` function's name, and optionally a Python operator
    of the same meaning for ``verify --gpu`` (checked like any operator of this slot)."""
    for key in value:
        if key not in CPP_KEYS:
            raise SpecError(f"unknown key {short(key)} of a C++ operator{hint(key, CPP_KEYS)}; allowed: "
                            f"{', '.join(CPP_KEYS)}", f"{fld}.{str(key)[:64]}")
    path, func = value.get("cpp"), value.get("function")
    if not isinstance(path, str) or _text_problem(path, 1024) or not path or path.startswith("/") \
            or "\\" in path or any(p in ("", ".", "..") for p in path.split("/")):
        raise SpecError(f"a C++ operator's 'cpp' must be a relative source path (no '..'), got {short(path)}",
                        f"{fld}.cpp")
    if not isinstance(func, str) or not func.isidentifier() or len(func) > 128:
        raise SpecError(f"a C++ operator's 'function' must be the extern \"C\" function's name, got {short(func)}",
                        f"{fld}.function")
    out = {"cpp": path, "function": func}
    if "reference" in value:
        ref = value["reference"]
        if isinstance(ref, dict):
            raise SpecError("a C++ operator's reference must be a Python operator", f"{fld}.reference")
        out["reference"] = check_op(ref, f"{role}'s reference", arity, f"{fld}.reference", arrays, scalars)
    return out
