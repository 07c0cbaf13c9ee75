"""The house rules of the package layout ("Untangle the house"), checked on the source with ``ast``.

Layers, bottom up: ``aot.algorithms`` (0, a leaf), ``aot.core`` and ``aot.cmake`` (1), ``aot.runtime`` and the
package ``__init__`` (2), ``aot.build`` (3), ``aot.record`` (4: it uses the build's CuPy entries; the verify
layer reads its launch store's format), ``aot.verify`` (5), ``aot.package`` (6), ``aot.cli`` (7),
``aot.__main__`` (8). A module imports only from its own layer or below (function-level imports count
too), and no set of modules imports itself round in a circle. Every import statement of every module is
read, relative ones resolved, ``TYPE_CHECKING`` blocks included.

The runtime's four rooms (``aot.runtime.loader``, ``.warmup``, ``.adapters``, ``.jit``): every runtime module
lives in one, each says what it is for, and the loader imports no other room when it is imported (only inside a
function, on the path that needs it; ``TYPE_CHECKING`` blocks do not run).

And the runtime's import closure: a process that loads a packaged artifact imports no build, verify,
package or CLI module, and of the runtime the loader alone.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT, repo_env

PKG = ROOT / "aot"

LAYERS = {"aot.algorithms": 0, "aot.core": 1, "aot.cmake": 1, "aot.runtime": 2, "aot": 2, "aot.build": 3,
          "aot.record": 4, "aot.verify": 5, "aot.package": 6, "aot.cli": 7, "aot.__main__": 8}

#: Imports from a lower layer up to a higher one that stay: the JIT fallback compiles with the build's recipe.
ALLOWED = {("aot.runtime.jit.jit", "aot.build.compile")}


MAX_LINES = 450


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def module_level(tree: ast.AST):
    """The nodes that run when the module is imported: not inside a function, not under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            test = child.test if isinstance(child, ast.If) else None
            if test is not None and "TYPE_CHECKING" in (getattr(test, "id", None), getattr(test, "attr", None)):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imports_of(name: str, path: Path, known: set[str], at_import: bool = False) -> set[str]:
    """The aot modules ``name`` imports, anywhere in its source (``at_import``: only those imported with it)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:  # "aot.core.spec.item_key" -> "aot.core.spec"
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    tree = ast.parse(path.read_text(), str(path))
    for node in (module_level(tree) if at_import else ast.walk(tree)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "aot" or alias.name.startswith("aot."):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not (target == "aot" or target.startswith("aot.")):
                continue
            for alias in node.names:  # `from . import sources` imports a module
                sub = f"{target}.{alias.name}"
                add(sub if sub in known else target)
    return found


def graph(at_import: bool = False) -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known, at_import) for name, path in mods.items()}


def layer(module: str) -> int:
    if module == "aot":
        return LAYERS["aot"]
    best = max((k for k in LAYERS if k != "aot" and (module == k or module.startswith(k + "."))), key=len)
    return LAYERS[best]


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def upward(g: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in g.items() for b in targets if layer(a) < layer(b)}


def test_the_graph_sees_every_kind_of_import():
    """Guard the parser itself: relative, absolute, `from . import module`, function-level imports."""
    g = graph()
    assert "aot.runtime.loader.sources" in g["aot.runtime.loader.registry"]  # from . import sources
    assert "aot.core.manifest" in g["aot.runtime.loader.catalog"]            # from ...core.manifest import ...
    assert "aot.build.compile" in g["aot.runtime.jit.jit"]                   # inside a function
    assert "aot.runtime.loader.default" in g["aot"]                          # the package's own __init__
    assert "aot.algorithms" in g["aot.runtime.loader.objects"]               # from ...algorithms import (a package)
    assert "aot.runtime.loader.lean" in g["aot.runtime.warmup.warmup"]       # from ..loader.lean import ... (a room up)
    assert all(m.startswith("aot") for targets in g.values() for m in targets)


def test_no_import_circle():
    g = graph()
    assert circles(g) == []


def test_imports_go_down_the_layers():
    found = upward(graph())
    for a, b in sorted(found):
        print(f"upward import: {a} (layer {layer(a)}) -> {b} (layer {layer(b)})")
    assert found == ALLOWED


# ------------------------------------------------------------------------------------ the runtime's rooms
#: The runtime's rooms (issue 35): the loader (a tiny runtime: what loading a packaged artifact needs), the warmup,
#: the adapters that serve at a library's own call, and the JIT with its caches.
ROOMS = ("aot.runtime.loader", "aot.runtime.warmup", "aot.runtime.adapters", "aot.runtime.jit")


def room(module: str) -> str | None:
    return next((r for r in ROOMS if module == r or module.startswith(r + ".")), None)


def test_every_runtime_module_lives_in_a_room():
    loose = [m for m in modules() if m.startswith("aot.runtime.") and room(m) is None]
    assert loose == []


def test_each_room_says_what_it_is_for():
    for r in ROOMS:
        path = modules()[r]
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc and len(doc.split()) >= 20, f"{path.relative_to(ROOT)}: say what the room is for"


def test_the_loader_imports_no_other_room_at_import():
    """The loader is the tiny runtime: the warmup, the adapters and the JIT come only inside a function, on the path
    that needs them (a warmup requested, a package that ships numba/CuPy kernels, the JIT fallback)."""
    g = graph(at_import=True)
    found = sorted((a, b) for a, targets in g.items() if room(a) == ROOMS[0]
                   for b in targets if room(b) not in (None, ROOMS[0]))
    assert found == []
    assert "aot.runtime.loader.import_hook" in g["aot"]  # the guard sees module-level imports
    assert "aot.runtime.jit.jit" in graph()["aot.runtime.loader.sources"]  # ... and the JIT fallback is inside one


def test_no_module_over_450_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted(PKG.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_class_over_16_methods():
    """One job per class: the Registry delegates its warm pool, sources and status to collaborators."""
    big = {}
    for p in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)) for x in node.body)
                if n > 16:
                    big[f"{p.relative_to(ROOT)}:{node.name}"] = n
    assert big == {}


# ------------------------------------------------------------------------- the runtime's import closure
CLOSURE = textwrap.dedent("""
    import ctypes, json, sys, warnings
    ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)  # the stand-in libcuda: this host may have no driver
    warnings.simplefilter("ignore")
    import aot
    reg = aot.Registry(sys.argv[1], device_sm=90)
    algo = reg.cccl("reduce_sum_i32")
    print(json.dumps({"source": reg.status()["reduce_sum_i32"].source, "raw": type(algo.raw).__name__,
                      "modules": sorted(m for m in sys.modules if m == "aot" or m.startswith("aot."))}))
""")

#: What loading one packaged cuda.compute artifact imports of aot, and nothing more.
RUNTIME_CLOSURE = [
    "aot",
    "aot.algorithms",
    "aot.algorithms._base",
    "aot.algorithms.binary_search",
    "aot.algorithms.forms",
    "aot.algorithms.histogram",
    "aot.algorithms.reduce",
    "aot.algorithms.scan",
    "aot.algorithms.select",
    "aot.algorithms.sort",
    "aot.algorithms.three_way_partition",
    "aot.algorithms.transform",
    "aot.algorithms.unique",
    "aot.core",
    "aot.core.arch",
    "aot.core.env",
    "aot.core.errors",
    "aot.core.format",
    "aot.core.formrules",
    "aot.core.keyschemas",
    "aot.core.log",
    "aot.core.majorset",  # a set of several CUDA majors: the installed one's is read (issue 40)
    "aot.core.manifest",
    "aot.core.oplang",
    "aot.core.release",
    "aot.core.rules",
    "aot.core.spec",
    "aot.core.text",
    "aot.core.version",
    "aot.core.versions",
    "aot.runtime",
    "aot.runtime.loader",
    "aot.runtime.loader.catalog",
    "aot.runtime.loader.cuctx",
    "aot.runtime.loader.driver",
    "aot.runtime.loader.import_hook",
    "aot.runtime.loader.lean",
    "aot.runtime.loader.library",
    "aot.runtime.loader.objects",
    "aot.runtime.loader.packaged",
    "aot.runtime.loader.registry",
    "aot.runtime.loader.sources",
    "aot.runtime.loader.stand_ins",
    "aot.runtime.loader.threads",
]


def test_loading_a_packaged_artifact_imports_only_the_runtime(small_build):
    from aot.build.toolchain import stub_library
    r = subprocess.run([sys.executable, "-c", CLOSURE, str(small_build.out), str(stub_library())], cwd=ROOT,
                       env=repo_env(), capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["source"] == "packaged" and out["raw"] == "_Reduce", out
    print("runtime import closure:", out["modules"])
    assert not [m for m in out["modules"] if m.startswith(("aot.build", "aot.verify", "aot.package", "aot.cli"))]
    assert not [m for m in out["modules"] if m.startswith("aot.runtime.") and room(m) != ROOMS[0]]  # the loader only
    assert out["modules"] == RUNTIME_CLOSURE


# ------------------------------------------------------------------------- a library's first packaged hit
FIRST_HIT = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("error")
    from cuda.core import Program, ProgramOptions
    import aot
    source = open(sys.argv[2]).read()
    before = {m for m in sys.modules if m == "aot" or m.startswith("aot.")}
    cache = aot.program_cache("unused", registry=aot.Registry(sys.argv[1]))
    Program(source, "c++", ProgramOptions(arch="sm_90", std="c++17")).compile("cubin", cache=cache)
    print(json.dumps({"counts": cache.counts, "new": sorted(m for m in sys.modules if m not in before and (
        m == "aot" or m.startswith("aot.") or m in ("logging", "yaml", "rich")))}))
""")

#: What a library's first ``Program.compile(cache=aot.program_cache(...))`` hit imports, after ``import aot``
#: (issue 42): the first-hit index's reader, the artifact codec, the CUDA-major check; no manifest, spec, rule,
#: form or logging module, and no thread machinery (:mod:`aot.runtime.loader.threads`: a warmup's).
FIRST_HIT_CLOSURE = [
    "aot.core.format",
    "aot.core.hitindex",
    "aot.core.versions",
    "aot.runtime.adapters",
    "aot.runtime.adapters.progkey",
    "aot.runtime.adapters.program_cache",
    "aot.runtime.loader.driver",
    "aot.runtime.loader.firsthit",
    "aot.runtime.loader.registry",
]


def test_a_first_packaged_hit_reads_no_manifest(small_build, tmp_path):
    """The packaged image served from the set's first-hit index; importing the manifest's modules would
    cost a library 19-23 ms on its first operation (measured on an H200, issue 42)."""
    from aot.core.manifest import load_manifest
    src = tmp_path / "morton.cu"
    src.write_text(load_manifest(small_build.out).built["morton"].source)
    r = subprocess.run([sys.executable, "-c", FIRST_HIT, str(small_build.out), str(src)], cwd=ROOT,
                       env=repo_env(), capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["counts"] == {"packaged": 1, "user": 0, "miss": 0}, out
    print("first-hit imports:", out["new"])
    assert out["new"] == FIRST_HIT_CLOSURE
