"""Checks that need neither torch nor a GPU: versions agree, the public signatures stay drop-in.

Reads the sources (ast, regex) instead of importing flash_kda, so it runs on any machine.
"""
import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "python", "flash_kda")

# MoonshotAI FlashKDA's flash_kda.fwd (commit 1ce47ea), which FLA's FlashKDABackend calls.
UPSTREAM_FWD = ["q", "k", "v", "g", "beta", "scale", "out", "A_log", "dt_bias", "lower_bound",
                "initial_state", "final_state", "cu_seqlens"]
# fla.ops.kda.chunk_kda keywords that flash_kda.chunk_kda accepts by name.
FLA_CHUNK_KWARGS = ["scale", "initial_state", "output_final_state", "cu_seqlens", "A_log", "dt_bias",
                    "lower_bound", "use_gate_in_kernel", "use_qk_l2norm_in_kernel",
                    "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "state_v_first"]
# Newer FLA keywords (flash-linear-attention main, 2026) that flash_kda.chunk_kda takes through **kwargs.
FLA_CHUNK_KWARGS_POPPED = ["transpose_state_layout", "use_graph", "max_num_seqs", "safe_gate", "disable_recompute",
                           "cu_seqlens_cpu", "cp_context", "return_intermediate_states"]


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def _function(path, name):
    tree = ast.parse(_read(path))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_versions_agree():
    py = re.search(r'__version__ = "([^"]+)"', _read("python", "flash_kda", "_version.py")).group(1)
    toml = re.search(r'^version = "([^"]+)"', _read("pyproject.toml"), re.M).group(1)
    header = _read("include", "flash_kda", "flash_kda.h")
    c = ".".join(re.search(rf"#define FLASH_KDA_VERSION_{p} (\d+)", header).group(1)
                 for p in ("MAJOR", "MINOR", "PATCH"))
    assert py == toml == c, f"_version.py {py}, pyproject.toml {toml}, flash_kda.h {c}"


def test_fwd_signature_is_upstream_compatible():
    fn = _function(os.path.join("python", "flash_kda", "_ops.py"), "fwd")
    positional = [a.arg for a in fn.args.args]
    assert positional[:len(UPSTREAM_FWD)] == UPSTREAM_FWD
    defaults = len(fn.args.defaults)
    first_default = len(positional) - defaults
    assert positional.index("initial_state") >= first_default, "upstream's optional args must keep defaults"
    assert positional.index("lower_bound") < first_default, "upstream's required args must stay required"


def test_fwd_cp_signature_is_upstream_compatible():
    # Upstream's flash_kda.fwd_cp (flash_kda/cp.py, later than 1ce47ea): fwd's arguments, then auto_cp=True.
    fn = _function(os.path.join("python", "flash_kda", "cp.py"), "fwd_cp")
    positional = [a.arg for a in fn.args.args]
    assert positional == UPSTREAM_FWD + ["auto_cp"] and not fn.args.kwonlyargs
    assert len(fn.args.defaults) == 4 and ast.literal_eval(fn.args.defaults[-1]) is True
    exported = _read("python", "flash_kda", "__init__.py")
    assert "from .cp import fwd_cp" in exported and '"fwd_cp"' in exported


def test_fwd_paths_agree_on_arguments():
    """fwd hands every argument to the general path and to _C._fwd_eager, the latter in the order
    of the op's schema (the positions binding_fwd_eager.inc's fwd_eager reads)."""
    path = os.path.join("python", "flash_kda", "_ops.py")
    fwd, general = _function(path, "fwd"), _function(path, "_fwd_general")
    names = [a.arg for a in fwd.args.args + fwd.args.kwonlyargs]
    assert names == [a.arg for a in general.args.args + general.args.kwonlyargs]
    assert ast.dump(fwd.args) == ast.dump(general.args), "fwd and _fwd_general must have the same defaults"
    call = next(n for n in ast.walk(fwd) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_fwd_eager")
    passed = [a.id for a in call.args]
    schema = re.search(r'"fwd\((.*?)\) -> \(\)"', re.sub(r'"\s*\n\s*"', "", _read("python", "csrc", "binding.cpp")),
                       re.S).group(1)
    schema_names = [re.match(r".*?(\w+)(=.*)?$", a.strip()).group(1) for a in schema.split(",")]
    assert passed == schema_names, f"_fwd_eager gets {passed}, the schema order is {schema_names}"
    assert set(passed) == set(names)


def test_chunk_kda_accepts_fla_keywords():
    fn = _function(os.path.join("python", "flash_kda", "_chunk.py"), "chunk_kda")
    names = [a.arg for a in fn.args.args + fn.args.kwonlyargs]
    assert names[:5] == ["q", "k", "v", "g", "beta"]
    missing = [n for n in FLA_CHUNK_KWARGS if n not in names]
    assert not missing and fn.args.kwarg is not None, f"missing FLA keywords: {missing}"
    source = _read("python", "flash_kda", "_chunk.py")
    unhandled = [n for n in FLA_CHUNK_KWARGS_POPPED if f'"{n}"' not in source]
    assert not unhandled, f"FLA keywords chunk_kda does not take: {unhandled}"


def test_package_layout():
    for name in ("__init__.py", "_ops.py", "_chunk.py", "_version.py"):
        assert os.path.isfile(os.path.join(PKG, name))
    binding = _read("python", "csrc", "binding.cpp")
    assert "TORCH_LIBRARY(flash_kda" in binding and "PyInit__C" in binding
