"""Issue 27 (items 1-2) and issue 30's matrix items: the build imports only what names a source (parent
packages stay bare unless ``[tool.aot] import-parents``), a module that cannot be imported fails its specs
alone, the stand-in driver is there before the matrix is read, no aot runtime warning while reading, a
``source:`` function is plain Python of the user's code, ``validate --no-code``, ``./build_matrix.yaml`` as
the default matrix, the manifest's aggregate bound; and same key, same bytes: two folders and worker order
give byte-identical CCCL blobs (the lambda-name collision among them).

CLI runs are subprocesses (``python -m aot``): importing a library's modules changes ``sys.modules`` and
loads the stand-in libcuda, which must not leak into the test process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import repo_env, side_by_side

HEAVY_INIT = textwrap.dedent('''\
    import heavydep_never_installed          # the library's API: a dataframe stack the build env lacks
    raise RuntimeError("the top-level __init__ ran")
''')

SHARED = 'DEVICE = \'extern "C" __device__ float twice(float x) { return 2.0f * x; }\\n\'\n'

KERNELS = textwrap.dedent('''\
    from . import shared                      # a sibling, relative
    from {pkg}.io.shared import DEVICE        # a sibling, absolute, through the bare parents
    SCALE = DEVICE + 'extern "C" __global__ void scale(float* x) {{ x[0] = twice(x[0]); }}\\n'

    def render(dtype):
        return shared.DEVICE + f'extern "C" __global__ void fill_{{dtype}}({{dtype}}* x) {{{{ x[0] = 1; }}}}\\n'
''')

OPS = "def add3(a, b):\n    return a + b + 3\n"


def project(root: Path, pkg: str, matrix: str, *, init: str = HEAVY_INIT, files: dict | None = None) -> Path:
    """A library shaped like the issue's: a top-level ``__init__`` that cannot be imported here, a subpackage
    whose ``__init__`` must not run, kernels across sibling modules, an operator from code."""
    (root / pkg / "io").mkdir(parents=True)
    (root / pkg / "ops").mkdir()
    (root / pkg / "__init__.py").write_text(init)
    (root / pkg / "io" / "__init__.py").write_text('raise RuntimeError("io/__init__ ran")\n')
    (root / pkg / "io" / "shared.py").write_text(SHARED)
    (root / pkg / "io" / "kernels.py").write_text(KERNELS.format(pkg=pkg))
    (root / pkg / "ops" / "__init__.py").write_text('raise RuntimeError("ops/__init__ ran")\n')
    (root / pkg / "ops" / "fns.py").write_text(OPS)
    for rel, text in (files or {}).items():
        (root / pkg / rel).write_text(text)
    path = root / "build_matrix.yaml"
    path.write_text("version: 1\n" + matrix.replace("PKG", pkg))
    return path


GOOD = '''\
cccl:
  - {name: red_code, algorithm: reduce, dtype: int32, op: "PKG.ops.fns:add3", init: 0}
nvrtc:
  - {name: scale, source: "PKG.io.kernels:SCALE", kernels: [scale]}
  - {name: "fill_{dtype}", source: "PKG.io.kernels:render", params: {dtype: [float, double]}, kernels: ["fill_{dtype}"]}
'''


def aot(*args: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aot", *args], cwd=cwd, env=repo_env(**env), capture_output=True,
                          text=True, timeout=timeout)


def error_line(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("aot: error: ")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


# ------------------------------------------------------------------------------------ bare parent packages
def test_parents_init_never_runs_and_siblings_import(tmp_path):
    """Before: ``No module named 'heavydep_never_installed'`` at the first unit, exit 2, nothing validated."""
    project(tmp_path, "geolib_a", GOOD)
    r = aot("validate", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "4 specs OK" in r.stdout and "fill_double" in r.stdout and "red_code" in r.stdout, r.stdout
    assert "build_matrix.yaml: 4 specs OK" in r.stdout  # which file: validate's last line


def test_import_parents_opt_in_runs_them(tmp_path):
    """``[tool.aot] import-parents = true``: the parents' ``__init__`` run (here: each leaves a trace), also
    when the matrix is named with --matrix from another folder."""
    init = ("import os, sys\nif 'aot.build.codeprobe' not in sys.modules:  # not aot's comparison child\n"
            "    open(os.environ['TRACE'], 'a').write(__name__ + '\\n')\n")
    m = project(tmp_path / "proj", "geolib_b", GOOD, init=init)
    for sub in ("io", "ops"):
        (m.parent / "geolib_b" / sub / "__init__.py").write_text(init)
    trace = tmp_path / "trace.txt"
    assert aot("validate", "--matrix", str(m), cwd=tmp_path, TRACE=str(trace)).returncode == 0
    assert not trace.exists()  # by default no parent runs in the reading process (only in aot's comparison child)
    (m.parent / "pyproject.toml").write_text('[project]\nname = "geolib-b"\nversion = "1"\n[tool.aot]\n'
                                             'package = "geolib_b"\nimport-parents = true\n')
    r = aot("validate", "--matrix", str(m), cwd=tmp_path, TRACE=str(trace))
    assert r.returncode == 0, r.stderr
    assert sorted(trace.read_text().split()) == ["geolib_b", "geolib_b.io", "geolib_b.ops"]
    (m.parent / "pyproject.toml").write_text('[tool.aot]\npackage = "geolib_b"\nimport-parents = "yes"\n')
    line = error_line(aot("validate", "--matrix", str(m), cwd=tmp_path, TRACE=str(trace)))
    assert "pyproject.toml: [tool.aot] key 'import-parents': must be true or false" in line


def test_a_module_that_cannot_import_fails_its_specs_alone(tmp_path):
    """validate lists every such spec with the module and the missing dependency, then exits 2; sys.exit()
    at import is an error of its spec, not exit 0 (issue 30); a name the bare parent would have defined is
    explained."""
    files = {"io/broken.py": "import pandas_like_missing\nSRC = 'x'\n",
             "io/exits.py": "import sys\nsys.exit(0)\n",
             "io/needs_init.py": "from geolib_c import CONFIG\nSRC = 'x'\n"}
    project(tmp_path, "geolib_c", GOOD + '''\
  - {name: broken, source: "PKG.io.broken:SRC", kernels: [k]}
  - {name: exits, source: "PKG.io.exits:SRC", kernels: [k]}
  - {name: needs_init, source: "PKG.io.needs_init:SRC", kernels: [k]}
''', files=files)
    r = aot("validate", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    failed = [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED ")]
    assert len(failed) == 3, r.stdout
    assert ":7: spec 'broken': field 'source': importing 'geolib_c.io.broken' needs the module " \
           "'pandas_like_missing', which is not installed here" in failed[0]
    assert "spec 'exits'" in failed[1] and "called sys.exit(0)" in failed[1]
    assert "spec 'needs_init'" in failed[2] and "'geolib_c' is a bare package here" in failed[2] \
        and "import-parents = true" in failed[2]
    assert "red_code" in r.stdout and "scale" in r.stdout  # the rest validated and listed
    assert "3 specs cannot be read: broken, exits, needs_init" in error_line(r)


def test_build_keep_going_builds_the_rest(tmp_path):
    """Without --keep-going nothing is built (one line, exit 2); with it the readable specs are built and the
    unreadable ones are failed items of the report (exit 4); --only that leaves them out builds."""
    project(tmp_path, "geolib_d", '''\
nvrtc:
  - {name: scale, source: "PKG.io.kernels:SCALE", kernels: [scale]}
  - {name: broken, source: "PKG.io.broken:SRC", kernels: [k]}
''', files={"io/broken.py": "import pandas_like_missing\nSRC = 'x'\n"})
    common = ("build", "--sm", "90", "--jobs", "1", "-q", "--out", "out")
    line = error_line(aot(*common, cwd=tmp_path))
    assert "spec 'broken'" in line and "'pandas_like_missing'" in line and not (tmp_path / "out").exists()
    r = aot(*common, "--keep-going", cwd=tmp_path)
    assert r.returncode == 4, r.stderr
    report = json.loads((tmp_path / "out" / "build-report.json").read_text())
    assert {(i["name"], i["kind"], i["status"]) for i in report["items"]} == {
        ("scale", "cubin", "built"), ("scale", "ptx", "built"), ("broken", "cubin", "failed"),
        ("broken", "ptx", "failed")}
    assert all("pandas_like_missing" in i["error"] for i in report["items"] if i["status"] == "failed")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {a["name"] for a in manifest["artifacts"]} == {"scale"} and len(manifest["incomplete"]) == 2
    assert aot(*common, "--only", "scale", cwd=tmp_path).returncode == 0


# ------------------------------------------------------------------------------ the reading process's world
def test_modules_importing_cuda_compute_read_without_a_driver(tmp_path):
    """A module doing ``from cuda.compute import OpKind`` at import: before, on this driverless host, the read
    failed (cuda.compute without bindings) unless libcuda was preloaded by hand."""
    from aot.build.toolchain import real_driver_present
    if real_driver_present():
        pytest.skip("a driver is present: the stand-in is not what makes this work here")
    files = {"io/uses_cc.py": "from cuda.compute import OpKind\nSRC = 'extern \"C\" __global__ void k() {}'\n"}
    project(tmp_path, "geolib_e", 'nvrtc:\n  - {name: k, source: "PKG.io.uses_cc:SRC", kernels: [k]}\n',
            files=files)
    r = aot("validate", cwd=tmp_path)
    assert r.returncode == 0 and "1 specs OK" in r.stdout, r.stdout + r.stderr


def test_reading_a_matrix_shows_no_aot_runtime_warning(tmp_path):
    """The README's pattern: ``__init__`` does ``Registry.from_package(__name__)``. Read with its parents
    bare, and with ``import-parents`` (where it runs), no "ships no artifacts" warning."""
    init = "import aot\nregistry = aot.Registry.from_package(__name__)\n"
    project(tmp_path, "geolib_f", 'nvrtc:\n  - {name: scale, source: "PKG.io.kernels:SCALE", kernels: [scale]}\n',
            init=init)
    (tmp_path / "geolib_f" / "io" / "__init__.py").write_text("")
    for opt_in in (False, True):
        (tmp_path / "pyproject.toml").write_text(f'[tool.aot]\npackage = "geolib_f"\nimport-parents = '
                                                 f'{str(opt_in).lower()}\n')
        r = aot("validate", "--matrix", "build_matrix.yaml", cwd=tmp_path, PYTHONWARNINGS="always")
        assert r.returncode == 0, r.stderr
        assert "ships no artifacts" not in r.stderr and "AotWarning" not in r.stderr, r.stderr


# ------------------------------------------------------------------------------------- what a matrix may call
@pytest.mark.parametrize("ref, params, fragment", [
    ("subprocess:getoutput", "{cmd: [\"id > PWNED\"]}", "names the standard library ('subprocess')"),
    ("builtins:open", "{file: [victim.txt], mode: [w]}", "names the standard library ('builtins')"),
    ("PKG.io.calls:getoutput", "{cmd: [\"id > PWNED\"]}", "is defined in the standard library ('subprocess')"),
    ("PKG.io.calls:cwd", "{x: [1]}", "is a builtin_function_or_method, not a plain Python function"),
    ("PKG.io.calls:Maker", "{x: [1]}", "is a type, not a plain Python function"),
    ("PKG.io.calls:joiner", "{iterable: [abc]}", "not a plain Python function"),
])
def test_a_source_function_is_plain_python_of_your_package(tmp_path, ref, params, fragment):
    """Issue 30's red team: ``subprocess:getoutput`` ran a shell command and ``builtins:open`` truncated a file,
    and validate exited 0. Refused now before any call, in one line."""
    calls = ("from subprocess import getoutput\nfrom os import getcwd as cwd\nclass Maker:\n"
             "    def __init__(self, x):\n        pass\njoiner = ', '.join\n")
    (tmp_path / "victim.txt").write_text("precious")
    project(tmp_path, "geolib_g", f'nvrtc:\n  - {{name: u, source: "{ref}", params: {params}, kernels: [k]}}\n',
            files={"io/calls.py": calls})
    r = aot("validate", cwd=tmp_path)
    assert r.returncode == 2 and fragment in error_line(r), r.stderr
    assert not (tmp_path / "PWNED").exists() and (tmp_path / "victim.txt").read_text() == "precious"


def test_validate_no_code_imports_nothing_and_lists_code(tmp_path):
    init = "import os\nopen(os.environ['TRACE'], 'a').write(__name__)\n"
    m = project(tmp_path, "geolib_h", GOOD + '  - {name: plain, source: plain.cu, kernels: [plain]}\n', init=init)
    (tmp_path / "plain.cu").write_text('extern "C" __global__ void plain() {}\n')
    (tmp_path / "geolib_h" / "io" / "kernels.py").write_text(init)  # importing it would leave a trace
    trace = tmp_path / "trace.txt"
    r = aot("validate", "--no-code", "--matrix", str(m), cwd=tmp_path, TRACE=str(trace))
    assert r.returncode == 0, r.stderr
    assert not trace.exists()
    code = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("code ")]
    assert code == ["red_code", "scale", "fill_{dtype}"], r.stdout
    assert "5 specs OK; 3 name code, not imported or checked (--no-code)" in r.stdout
    m.write_text(m.read_text().replace("dtype: int32", "dtype: int33"))  # the rest is still validated
    line = error_line(aot("validate", "--no-code", "--matrix", str(m), cwd=tmp_path, TRACE=str(trace)))
    assert "spec 'red_code': field 'dtype': unknown dtype 'int33'" in line and not trace.exists()


def test_build_and_validate_without_matrix_read_this_folders(tmp_path):
    """Issue 30: validate without --matrix in a project validated aot's bundled matrix. Both commands read
    ./build_matrix.yaml when there is one, and say so."""
    (tmp_path / "build_matrix.yaml").write_text("version: 1\ncccl:\n  - {name: mine, algorithm: reduce, dtype: "
                                                "int32, op: plus, init: 0}\n")
    r = aot("validate", cwd=tmp_path)
    assert r.returncode == 0 and "build_matrix.yaml: 1 specs OK" in r.stdout and "mine" in r.stdout, r.stdout
    (tmp_path / "build_matrix.yaml").write_text("version: 1\ncccl:\n  - {name: mine, algorithm: reduec}\n")
    for cmd in (("validate",), ("build", "--sm", "90", "-q")):
        line = error_line(aot(*cmd, cwd=tmp_path))
        assert line.startswith("aot: error: build_matrix.yaml:3: spec 'mine': field 'algorithm'"), line
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    r = aot("validate", cwd=elsewhere)
    from aot.build.matrix import default_matrix_path
    assert r.returncode == 0 and f"{default_matrix_path()}: " in r.stdout, r.stdout


def test_a_manifest_over_the_readers_bound_is_refused_before_building(tmp_path):
    """Five sources of nearly 4 MB, each within its own bound, built (exit 0) into a 20 MB manifest.json that
    verify, inspect and Registry then refused. Refused now, before anything is compiled or written."""
    units = []
    for i in range(5):
        (tmp_path / f"u{i}.cu").write_text(f'extern "C" __global__ void k{i}() {{}}\n//' + "x" * (4_000_000 - 64))
        units.append(f"  - {{name: u{i}, source: u{i}.cu, kernels: [k{i}]}}")
    (tmp_path / "build_matrix.yaml").write_text("version: 1\nnvrtc:\n" + "\n".join(units) + "\n")
    r = aot("build", "--sm", "90", "--jobs", "1", "-q", "--out", "out", cwd=tmp_path)
    line = error_line(r)
    assert r.returncode == 2 and "manifest.json would be about 19.1 MiB, over the 16 MiB every reader accepts" \
        in line, line
    assert not (tmp_path / "out" / "manifest.json").exists() and not list((tmp_path / "out").rglob("*.aot"))


# ------------------------------------------------------------------------------------ same key, same bytes
SAME_BYTES = '''\
cccl:
  - {name: a_plain, algorithm: reduce, dtype: float32, op: "lambda left, right: left + right", init: 0}
  - {name: b_fused, algorithm: reduce, dtype: float32, op: "lambda left, right: left + right", init: 0,
     input: {transform: "lambda x: x * x"}}
  - {name: c_code, algorithm: reduce, dtype: int32, op: "PKG.ops.fns:add3", init: 0, input: counting}
'''


def test_same_key_same_bytes_across_folders_and_worker_order(tmp_path):
    """Built in two folders (different absolute paths, each the build's working folder), one worker: b_fused
    after a_plain in the first, first in the second. Before: b_fused failed to link in the first ("Linking
    globals named 'wrapped__lambda__0': symbol multiply defined!"), and a blob with an iterator differed by
    folder (NVRTC writes the working folder into the iterator's LTO-IR)."""
    from aot.core import format as fmt
    one = tmp_path / "p"
    two = tmp_path / ("a-much-longer-project-folder-name" * 2)
    runs = []
    for root, only in ((one, ()), (two, ("--only", "b_fused,c_code"))):
        root.mkdir()
        project(root, "geolib_same", SAME_BYTES, init="")
        runs.append(lambda root=root, only=only: aot("build", "--sm", "90", "--jobs", "1", "-q", "--out", "out",
                                                     *only, cwd=root, timeout=600))
    for r in side_by_side(*runs):  # two processes at once (tests/conftest.py)
        assert r.returncode == 0, r.stderr[-3000:]
    for name in ("b_fused", "c_code"):
        a, b = (fmt.read(root / "out" / "cccl" / name / "sm_90.aot") for root in (one, two))
        assert a.header["content_key"] == b.header["content_key"]
        assert bytes(a.payload) == bytes(b.payload), f"{name}: {len(a.payload)} vs {len(b.payload)} bytes"
