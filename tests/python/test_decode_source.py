"""Source checks of the decode API that need neither torch nor a GPU (ast and regex, like
test_packaging.py): decode hands its arguments to _C._decode_eager in the op schema's order, the
general path takes the same arguments, and fused_recurrent_kda keeps FLA's positional names.
"""
import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# fla.ops.kda.fused_recurrent_kda (flash-linear-attention main, 2026): positional parameters in order.
FLA_FUSED_RECURRENT = ["q", "k", "v", "g", "beta", "A_log", "dt_bias", "scale", "initial_state",
                       "output_final_state", "use_qk_l2norm_in_kernel", "use_gate_in_kernel",
                       "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "lower_bound", "state_v_first",
                       "cu_seqlens"]
# What serving stacks pass by keyword to the lower-level function (spec section 8).
SERVING_KWARGS = ["inplace_final_state", "ssm_state_indices", "num_accepted_tokens", "out"]


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def _function(path, name):
    tree = ast.parse(_read(path))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _schema_names(source, op):
    schema = re.search(rf'"{op}\((.*?)\) -> \(\)"', re.sub(r'"\s*\n\s*"', "", source), re.S).group(1)
    return [re.match(r".*?(\w+)(=.*)?$", a.strip()).group(1) for a in schema.split(",")]


def test_decode_paths_agree_with_the_schema():
    path = os.path.join("python", "flash_kda", "_decode.py")
    dec = _function(path, "decode")
    names = [a.arg for a in dec.args.args + dec.args.kwonlyargs]
    call = next(n for n in ast.walk(dec) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_decode_eager")
    passed = [a.id for a in call.args]
    schema = _schema_names(_read("python", "csrc", "binding_decode.inc"), "decode")
    assert passed == schema, f"_decode_eager gets {passed}, the schema order is {schema}"
    assert set(passed) == set(names)
    general = _function(path, "_decode_general")
    assert [a.arg for a in general.args.args + general.args.kwonlyargs] == names
    # binding_decode_eager.inc reads 20 arguments.
    assert len(passed) == 20 and "nargs != 20" in _read("python", "csrc", "binding_decode_eager.inc")


def test_fused_recurrent_kda_has_fla_names():
    fn = _function(os.path.join("python", "flash_kda", "_decode.py"), "fused_recurrent_kda")
    positional = [a.arg for a in fn.args.args]
    assert positional[:len(FLA_FUSED_RECURRENT)] == FLA_FUSED_RECURRENT
    assert all(k in positional for k in SERVING_KWARGS) and fn.args.kwarg is not None


def test_decode_is_exported():
    init = _read("python", "flash_kda", "__init__.py")
    assert "decode" in init and "fused_recurrent_kda" in init
    assert '#include "binding_decode.inc"' in _read("python", "csrc", "binding.cpp")


if __name__ == "__main__":  # without pytest
    for name, f in list(globals().items()):
        if name.startswith("test_"):
            f()
            print(name, "ok")
