#!/usr/bin/env python3
"""The GPU mutation set of the release gate (issue 16): artifact sets that pass every integrity check but
compute the wrong thing, each of which ``aot verify --gpu`` must FAIL.

From a built artifact directory (the gate matrix, tests/data/gate/build_matrix.yaml), writes one directory
per mutant under ``--out``: the base's manifest and artifacts for the mutated spec (``--whole``: every
spec) in which that spec's payloads are replaced by those of a *mutant* definition (built here, on the
CPU), while the manifest keeps the ORIGINAL definition and every header keeps the original name and
content key (payload size and sha256 recomputed in the header and the manifest entry). ``aot verify DIR``
(integrity) and the loader's own checks (content key recomputed from the manifest's definition, header ==
entry, producer) all pass: only running the kernels can tell. Mutations:

  proxyfix-off  the spec built WITHOUT cccl_patches' ProxyArray fix (sorts with values): keys-only kernels,
                the values output never written
  op-swap       the operator swapped at build time: plus -> maximum, a lambda's first operator (+ -> -, * -> +),
                an operator from code for another (--code-swap A=B)
  init-swap     init 0 -> 1 (cuda.compute takes init at call time: an identical payload, reported as an
                equivalent mutant and left out of the score)
  order-swap    ascending <-> descending
  algo-swap     exclusive_scan <-> inclusive_scan, lower_bound <-> upper_bound
  dtype-swap    an element type for another of the same size (float32 <-> int32, float64 <-> int64): never a
                size change, so a mutant cannot write out of bounds
  unwritten     an NVRTC unit whose kernels return early in thread 0 of the last block (one output unwritten)
  state-swap    (issue 20) the declared state fields in reverse order: the operator reads the caller's
                second array where it should read the first
  state-offset  every subscript of a state array in the operator's lambda read one element further
                (``mask[i]`` -> ``mask[i + 1]``)
  transform-swap  an iterator's transform operator swapped (its lambda's first operator, as op-swap)
  zip-swap      a zip's members in reverse order (members of different kinds, so the code differs)
  offset        a counting leaf of an iterator argument started one further (wrapped in ``i + 1``): the
                call-time state (the start) is the same, the compiled iterator is not

Writes ``expected.json`` (mutant directory -> the spec that must fail, the mutation, the mutant definition;
``equivalent``: mutants whose payload equals the original) and checks every mutant directory on the CPU as
the loader would (integrity, content keys, payload changed). The default plan is the gate's 22 mutants
(issue 16's 14, issue 20's 8);
``--all`` makes every mutation that fits every spec. Run with the build's environment (operators from code
importable: PYTHONPATH=tests/data/gate)::

    PYTHONPATH=tests/data/gate:. python .ci/gpu/make_mutants.py --base .gpu/gate --out .gpu/mutants --jobs 2
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MUTATIONS = ("proxyfix-off", "op-swap", "init-swap", "order-swap", "algo-swap", "dtype-swap", "unwritten",
             "state-swap", "state-offset", "transform-swap", "zip-swap", "offset")
#: The release gate's mutants over tests/data/gate/build_matrix.yaml: every kind the issue names.
GATE_PLAN = [("proxyfix-off", "gate_radix_sort_pairs_i32_i32"), ("proxyfix-off", "gate_segmented_sort_pairs_i32_i32"),
             ("op-swap", "gate_sq1_f32_f64"), ("op-swap", "gate_exclusive_scan_i32"),
             ("op-swap", "gate_segmented_reduce_pair"), ("op-swap", "gate_three_way_f64"),
             ("init-swap", "gate_reduce_sum_f32"), ("order-swap", "gate_radix_sort_pairs_i32_i32"),
             ("algo-swap", "gate_exclusive_scan_i32"), ("algo-swap", "gate_lower_bound_f32"),
             ("dtype-swap", "gate_sq1_f32_f64"), ("dtype-swap", "gate_reduce_sum_f32"),
             ("dtype-swap", "gate_inclusive_scan_f32"), ("unwritten", "morton"),
             # issue 20: state, iterators
             ("state-swap", "gate_state_diff_f32"), ("state-offset", "gate_state_mask_select"),
             ("state-offset", "gate_state_in_iterator"), ("transform-swap", "gate_it_transform_array_f64"),
             ("transform-swap", "gate_it_transform_out_f64"), ("zip-swap", "gate_it_zip_f64"),
             ("offset", "gate_search_counting_i64"), ("offset", "gate_it_transform_counting_i64")]
GATE_CODE_SWAP = {"gate_ops:add_pair": "gate_ops:sub_pair"}

_BUILTIN_SWAP = {"plus": "maximum", "minus": "plus", "multiplies": "plus", "minimum": "maximum", "maximum": "minimum",
                 "less": "greater", "greater": "less", "less_equal": "greater_equal", "greater_equal": "less_equal",
                 "equal_to": "not_equal_to", "not_equal_to": "equal_to", "bit_and": "bit_or", "bit_or": "bit_and",
                 "bit_xor": "bit_and"}
_DTYPE_SWAP = {"int32": "float32", "uint32": "float32", "float32": "int32", "int64": "float64", "uint64": "float64",
               "float64": "int64", "int8": "uint8", "uint8": "int8", "int16": "uint16", "uint16": "int16"}
_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.Mult, ast.FloorDiv: ast.Mod,
               ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
               ast.BitXor: ast.BitAnd, ast.LShift: ast.RShift, ast.RShift: ast.LShift}
_CMP_SWAP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
_ALGO_SWAP = {"exclusive_scan": "inclusive_scan", "inclusive_scan": "exclusive_scan", "lower_bound": "upper_bound",
              "upper_bound": "lower_bound"}
_PAIRS = ("radix_sort", "segmented_sort", "merge_sort")
#: The definition fields holding iterator nodes (aot.algorithms.forms), and those holding operators.
_SEQ_FIELDS = ("input", "output", "values")
_OP_FIELDS = ("op", "first_op", "second_op")
_COUNTING_OFFSET = "lambda i: i + 1"


def _lambda_fields(d: dict) -> list[tuple[str, str]]:
    """(where, lambda source) of every lambda of a definition: its operators, then its iterators' transforms."""
    out = [(f, d[f]) for f in _OP_FIELDS if isinstance(d.get(f), str) and d[f].lstrip().startswith("lambda")]

    def walk(node, where):
        if isinstance(node, dict):
            if isinstance(node.get("transform"), str):
                out.append((where + ".transform", node["transform"]))
            for k, v in node.items():
                if k != "transform":
                    walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
    for f in _SEQ_FIELDS:
        walk(d.get(f), f)
    return out


def _replace_node(d: dict, fn) -> tuple[dict | None, str]:
    """``d`` with the first iterator node (depth first) that ``fn(node)`` rewrites (returns not None)
    replaced; ``(None, "")`` when none does."""
    def walk(node, where):
        new = fn(node)
        if new is not None:
            return new, where
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("transform", "modifier"):
                    continue
                got, at = walk(v, f"{where}.{k}")
                if got is not None:
                    return {**node, k: got}, at
        elif isinstance(node, list):
            for i, v in enumerate(node):
                got, at = walk(v, f"{where}[{i}]")
                if got is not None:
                    return [*node[:i], got, *node[i + 1:]], at
        return None, ""
    for f in _SEQ_FIELDS:
        if f in d:
            got, at = walk(d[f], f)
            if got is not None:
                return {**copy.deepcopy(d), f: got}, at
    return None, ""


def offset_subscripts(src: str, names: set[str]) -> str | None:
    """Every ``NAME[index]`` of a state array in a lambda read at ``index + 1``."""
    tree = ast.parse(src, mode="eval")
    hit = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names:
            node.slice = ast.BinOp(left=node.slice, op=ast.Add(), right=ast.Constant(1))
            hit = True
    return ast.unparse(tree) if hit else None


def mutate_lambda(src: str) -> str | None:
    """The first binary operator (breadth first) swapped, else the first comparison flipped."""
    tree = ast.parse(src, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
            node.op = _BINOP_SWAP[type(node.op)]()
            return ast.unparse(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _CMP_SWAP:
            node.ops[0] = _CMP_SWAP[type(node.ops[0])]()
            return ast.unparse(tree)
    return None


def inject_early_return(source: str) -> tuple[str, int]:
    """``if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) return;`` first in every ``__global__`` body."""
    out, i, n = [], 0, 0
    while (j := source.find("__global__", i)) >= 0 and (k := source.find("{", j)) >= 0:
        out += [source[i:k + 1], "\n  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) return;  // mutant\n"]
        i, n = k + 1, n + 1
    return "".join(out) + source[i:], n


def mutate(mutation: str, d: dict, code_swap: dict[str, str]) -> tuple[dict | None, str]:
    """(the mutant definition, or None where the mutation does not fit; a description)."""
    m, algo = copy.deepcopy(d), d.get("algorithm")
    if algo is None:  # an NVRTC unit
        if mutation != "unwritten":
            return None, ""
        m["source"], n = inject_early_return(d["source"])
        return (m, f"{n} kernel(s) return early in thread 0 of the last block") if n else (None, "")
    if mutation in ("state-swap", "state-offset", "transform-swap", "zip-swap", "offset"):
        return _mutate_forms(mutation, d)
    if mutation == "proxyfix-off":
        return (m, "built without the ProxyArray fix") if algo in _PAIRS and d.get("value_dtype") else (None, "")
    if mutation == "op-swap":
        for f in ("op", "first_op", "second_op"):
            op = d.get(f)
            if not isinstance(op, str):
                continue
            if op in _BUILTIN_SWAP:
                m[f] = _BUILTIN_SWAP[op]
            elif op.lstrip().startswith("lambda") and mutate_lambda(op):
                m[f] = mutate_lambda(op)
            elif op in code_swap:
                from aot.core.opref import source_digest
                m[f] = code_swap[op]
                m["code"] = {**{k: v for k, v in d.get("code", {}).items() if k != op},
                             code_swap[op]: source_digest(code_swap[op])}
            else:
                continue
            return m, f"{f}: {op!r} -> {m[f]!r}"
        return None, ""
    if mutation == "init-swap":
        if "init" not in d:
            return None, ""
        m["init"] = [1] * len(d["init"]) if isinstance(d["init"], list) else 1
        return m, f"init: {d['init']!r} -> {m['init']!r}"
    if mutation == "order-swap":
        if algo not in ("radix_sort", "segmented_sort"):
            return None, ""
        m["order"] = "descending" if d.get("order", "ascending") == "ascending" else "ascending"
        return m, f"order -> {m['order']}"
    if mutation == "algo-swap":
        if algo not in _ALGO_SWAP:
            return None, ""
        m["algorithm"] = _ALGO_SWAP[algo]
        return m, f"algorithm: {algo} -> {m['algorithm']}"
    if mutation == "dtype-swap":
        if d.get("types") or algo in ("histogram_even", "select", "three_way_partition"):
            return None, ""
        for f in ("out_dtype", "dtype"):  # a transform's output first: the input stays what the check feeds
            t = d.get(f)
            if isinstance(t, str) and t in _DTYPE_SWAP:
                m[f] = _DTYPE_SWAP[t]
                return m, f"{f}: {t} -> {m[f]}"
        return None, ""
    return None, ""


def _mutate_forms(mutation: str, d: dict) -> tuple[dict | None, str]:
    """The issue-20 mutations of state and iterator arguments (see the module docstring)."""
    m = copy.deepcopy(d)
    state = d.get("state") or []
    arrays = {name for name, decl in state if decl.endswith("[]")}
    if mutation == "state-swap":
        if len(state) < 2:
            return None, ""
        m["state"] = list(reversed(copy.deepcopy(state)))
        return m, f"state: {[n for n, _ in state]} -> {[n for n, _ in m['state']]}"
    if mutation == "state-offset":
        for where, src in _lambda_fields(d):
            new = offset_subscripts(src, arrays)
            if new is None:
                continue
            if "." in where or "[" in where:  # inside an iterator node
                def put(n, old=src, new=new):
                    return {**n, "transform": new} if isinstance(n, dict) and n.get("transform") == old else None
                return _replace_node(d, put)[0], f"{where}: {src!r} -> {new!r}"
            m[where] = new
            return m, f"{where}: {src!r} -> {new!r}"
        return None, ""
    if mutation == "transform-swap":
        def swap(n):
            if isinstance(n, dict) and isinstance(n.get("transform"), str):
                new = mutate_lambda(n["transform"])
                return {**n, "transform": new} if new else None
            return None
        md, at = _replace_node(d, swap)
        return (md, f"{at}.transform swapped") if md else (None, "")
    if mutation == "zip-swap":
        def rev(n):
            if isinstance(n, dict) and isinstance(n.get("zip"), list) and n["zip"] != n["zip"][::-1]:
                return {**n, "zip": n["zip"][::-1]}
            return None
        md, at = _replace_node(d, rev)
        return (md, f"{at}: zip members reversed") if md else (None, "")
    if mutation == "offset":
        def shift(n):
            if n == "counting" or (isinstance(n, dict) and set(n) == {"counting"}):
                return {"transform": _COUNTING_OFFSET, "over": n}
            return None
        md, at = _replace_node(d, shift)
        return (md, f"{at}: counting started at +1") if md else (None, "")
    return None, ""


# ------------------------------------------------------------------------------------ compiling (child)
def child(job_path: str) -> int:
    """Compile one item in a fresh process (the ProxyArray fix is process-global)."""
    job = json.loads(Path(job_path).read_text())
    from aot.build.compile import compile_cccl, compile_nvrtc_item
    from aot.build.toolchain import choose_driver, worker_setup
    from aot.core.rules import spec_from_definition
    worker_setup(choose_driver().path)
    if job["unpatched"]:
        import cccl_patches
        cccl_patches._applied = True  # apply() becomes a no-op: cuda.compute's own ProxyArray handling
    spec = spec_from_definition(job["definition"])
    extra = {}
    if job["kind"] == "cccl-blob":
        payload = compile_cccl(spec, job["sm"])
    else:
        payload, symbols = compile_nvrtc_item(spec, job["sm"], job["kind"])
        if symbols:
            extra["symbols"] = symbols
    Path(job["out"]).write_bytes(payload)
    Path(job["out"] + ".json").write_text(json.dumps(extra))
    return 0


def compile_item(definition: dict, sm: int, kind: str, unpatched: bool, out: Path):
    """(payload or None, header extras, error, seconds)."""
    job = out.with_suffix(".job.json")
    job.write_text(json.dumps({"definition": definition, "sm": sm, "kind": kind, "unpatched": unpatched,
                               "out": str(out)}))
    t0 = time.time()
    proc = subprocess.run([sys.executable, __file__, "--child", str(job)], capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        return None, {}, " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:]), time.time() - t0
    return out.read_bytes(), json.loads(Path(str(out) + ".json").read_text()), "", time.time() - t0


# ------------------------------------------------------------------------------------ writing and checking
def write_mutant(base: Path, dest: Path, swaps: dict[str, tuple[bytes, dict]], info: dict,
                 keep: set[str] | None = None) -> None:
    """``base`` copied to ``dest`` with the payload of each manifest path in ``swaps`` replaced; the header
    keeps everything (name, content key, SM, kind, producer) but the payload's size and sha256. ``keep``:
    only these specs (their definitions and artifacts: a consistent, smaller set), else all of them."""
    from aot.core.format import encode, read
    if dest.exists():
        shutil.rmtree(dest)
    doc = json.loads((base / "manifest.json").read_text())
    if keep is not None:
        doc["specs"] = {k: v for k, v in doc["specs"].items() if k in keep}
        doc["artifacts"] = [e for e in doc["artifacts"] if e["name"] in keep]
    dest.mkdir(parents=True)
    for entry in doc["artifacts"]:
        (dest / entry["path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(base / entry["path"], dest / entry["path"])
    for entry in doc["artifacts"]:
        if entry["path"] in swaps:
            payload, extra = swaps[entry["path"]]
            f = dest / entry["path"]
            header = dict(read(f).header)
            header.update(payload_size=len(payload), payload_sha256=hashlib.sha256(payload).hexdigest(), **extra)
            data = encode(header, payload)
            f.write_bytes(data)
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (dest / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")
    (dest / "mutation.json").write_text(json.dumps(info, indent=1) + "\n")


def loader_problems(base: Path, dest: Path) -> list[str]:
    """What the loader or ``aot verify DIR`` would refuse in ``dest`` (must be nothing), and whether any
    payload changed at all."""
    from aot.core.format import decode, read_file
    from aot.core.manifest import load_manifest
    from aot.core.spec import item_key
    from aot.core.versions import check_producer
    from aot.verify.gpu import coverage, verify_integrity
    problems = verify_integrity(dest)[1]
    m, b = load_manifest(dest), load_manifest(base)
    base_sha = {e["path"]: e["sha256"] for e in b.artifacts}
    problems += [f"{n}: definition differs from the base's" for n in m.specs if m.specs[n] != b.specs.get(n)]
    for e in m.artifacts:
        h = decode(read_file(m.path_of(e), expect_size=e["size"])).header
        if h["content_key"] != item_key(m.built[e["name"]], e["sm"], e["payload_kind"], m.producer):
            problems.append(f"{e['path']}: stale content key")
        check_producer(h["producer"], h["family"])
    if coverage(m).missing:
        problems.append(f"coverage: {coverage(m).missing}")
    if all(base_sha.get(e["path"]) == e["sha256"] for e in m.artifacts):
        problems.append("no payload changed")
    return problems


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, type=Path, help="the built artifact directory (the gate set)")
    ap.add_argument("--out", required=True, type=Path, help="where the mutant directories go")
    ap.add_argument("--sm", default=None, help="only artifacts of these SMs (e.g. 90)")
    ap.add_argument("--all", action="store_true", help="every mutation that fits every spec, not the gate plan")
    ap.add_argument("--code-swap", action="append", default=[], metavar="A=B",
                    help="op-swap an operator from code A for B (default: the gate's add_pair=sub_pair)")
    ap.add_argument("--whole", action="store_true",
                    help="copy every spec into each mutant set (default: only the mutated spec, ~0.2-1 MB each)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    base = a.base.resolve()
    doc = json.loads((base / "manifest.json").read_text())
    sms = {int(s) for s in a.sm.split(",")} if a.sm else None
    code_swap = dict(s.split("=", 1) for s in a.code_swap) or GATE_CODE_SWAP
    plan = ([(mu, name) for mu in MUTATIONS for name in sorted(doc["specs"])] if a.all else
            [(mu, name) for mu, name in GATE_PLAN if name in doc["specs"]])
    work = a.out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    from aot.core.rules import spec_from_definition
    jobs = []  # (mutation, spec, mutant definition, description, manifest entry)
    for mutation, name in plan:
        md, desc = mutate(mutation, doc["specs"][name], code_swap)
        if md is None:
            if not a.all:
                print(f"plan: {mutation} does not fit {name}")
            continue
        spec_from_definition(md)  # an invalid mutant spec fails here, loudly
        jobs += [(mutation, name, md, desc, e) for e in doc["artifacts"]
                 if e["name"] == name and (sms is None or e["sm"] in sms)]
    n_mutants = len({(j[0], j[1]) for j in jobs})
    # Controls: the base's own definitions rebuilt here. A mutant equal to its control is equivalent (init is
    # a call argument); a control unequal to the base means the base came from other code: rebuild it.
    controls = sorted({j[1] for j in jobs if j[0] == "init-swap"} or {jobs[0][1]} if jobs else set())
    jobs += [("control", name, doc["specs"][name], "the base's definition, rebuilt", e) for name in controls
             for e in doc["artifacts"] if e["name"] == name and (sms is None or e["sm"] in sms)]
    print(f"{n_mutants} mutants + {len(controls)} control(s), {len(jobs)} items to compile ({a.jobs} at a time)")
    t0 = time.time()

    def build(job):
        mutation, name, md, _, e = job
        out = work / f"{mutation}.{name}.{e['payload_kind']}.{e['sm']}.bin"
        return job, compile_item(md, e["sm"], e["payload_kind"], mutation == "proxyfix-off", out)

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        results = list(pool.map(build, jobs))
    from aot.core.format import read
    control = {e["path"]: r[0] for (mu, _, _, _, e), r in results if mu == "control"}
    stale = [p for p, payload in control.items() if payload is None or payload != read(base / p).payload]
    if stale:
        print(f"error: {base} was not built by this checkout: rebuilding {stale[0]} gives other bytes (or fails); "
              f"rebuild the base, then the mutants")
        return 1
    groups: dict[tuple[str, str], dict] = {}
    for (mutation, name, md, desc, e), (payload, extra, error, secs) in results:
        if mutation == "control":
            continue
        g = groups.setdefault((mutation, name), {"swaps": {}, "errors": [], "same": 0, "s": 0.0, "desc": desc,
                                                 "definition": md})
        g["s"] += secs
        if payload is None:
            g["errors"].append(f"{e['path']}: {error}")
        elif payload == control.get(e["path"], read(base / e["path"]).payload):
            g["same"] += 1
        else:
            g["swaps"][e["path"]] = (payload, extra)
    expected: dict = {"base": str(base), "mutants": {}, "equivalent": {}, "failed_to_build": {}}
    print(f"compiled in {time.time() - t0:.0f} s wall\n{'mutant':54} {'s':>5}  result")
    bad = 0
    for (mutation, name), g in groups.items():
        dest_name = f"mut-{mutation}-{name}"
        info = {"mutation": mutation, "spec": name, "description": g["desc"], "mutant_definition": g["definition"]}
        if g["errors"]:
            expected["failed_to_build"][dest_name] = {**info, "errors": g["errors"]}
            status = "build failed: " + g["errors"][0][:150]
            bad += 1
        elif not g["swaps"]:
            expected["equivalent"][dest_name] = {**info, "why": "identical payload"}
            status = "equivalent (identical payload): not a mutant"
        elif mutation == "init-swap":  # seen on the H100: the blob differs, the results do not
            expected["equivalent"][dest_name] = {**info, "why": "init is a call-time argument (h_init)"}
            status = "equivalent (cuda.compute takes init at call time): not a mutant"
        else:
            write_mutant(base, a.out / dest_name, g["swaps"], {**info, "must_fail": name},
                         keep=None if a.whole else {name})
            problems = loader_problems(base, a.out / dest_name)
            expected["mutants"][dest_name] = {**info, "must_fail": name, "replaced": sorted(g["swaps"])}
            status = "written; loader checks pass" if not problems else f"BAD: {problems[:2]}"
            bad += bool(problems)
        print(f"{dest_name:54} {g['s']:5.1f}  {status}; {g['desc']}")
    (a.out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(expected['mutants'])} mutants, {len(expected['equivalent'])} equivalent, "
          f"{len(expected['failed_to_build'])} failed to build -> {a.out / 'expected.json'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
