"""Helpers for the Python tests: environment checks, golden-file loading, a float64 reference.

Imports torch lazily so that the module loads on machines without it (the tests then skip).
"""
import json
import math
import os

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _first_dir(*candidates):
    for c in candidates:
        if c and os.path.isdir(c):
            return os.path.abspath(c)
    return None


def golden_dir():
    """The shared golden set (an extra, independent check): FLASH_KDA_GOLDEN_DIR, else its copy in
    .gpu_data/golden (scripts/prepare_gpu_data.sh --shared DIR); None when absent."""
    return _first_dir(os.environ.get("FLASH_KDA_GOLDEN_DIR"),
                      os.path.join(_REPO, ".gpu_data", "golden"))


def repo_golden_dir():
    """The repository's generated golden folder (written by the CMake build: target
    flash_kda_golden_data): FLASH_KDA_REPO_GOLDEN_DIR, else <repo>/build/tests/golden. Returned
    even when absent (the tests then fail, saying how to make it)."""
    return os.path.abspath(os.environ.get("FLASH_KDA_REPO_GOLDEN_DIR")
                           or os.path.join(_REPO, "build", "tests", "golden"))


def fla_dir():
    d = _first_dir(os.environ.get("FLASH_KDA_FLA_DIR"), os.path.join(_REPO, ".gpu_data"))
    return d if d and os.path.isdir(os.path.join(d, "fla")) else None


def skip_reason():
    """None when torch, CUDA and a compute capability 9.0 GPU are present, else why not."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return f"no CUDA device visible to torch {torch.__version__}"
    cc = torch.cuda.get_device_capability()
    if cc != (9, 0):
        return f"flash_kda needs a compute capability 9.0 GPU, found {cc[0]}.{cc[1]} ({torch.cuda.get_device_name()})"
    return None


# ---------------------------------------------------------------------------------------------
# Golden cases (format: shared/docs/spec.md section 3)

def golden_cases(d=None):
    """Case names of golden folder d (default: the shared one); [] when it has no index.json."""
    d = golden_dir() if d is None else d
    if d is None or not os.path.isfile(os.path.join(d, "index.json")):
        return []
    with open(os.path.join(d, "index.json")) as f:
        return list(json.load(f)["cases"])


def golden_tolerances(d=None):
    with open(os.path.join(golden_dir() if d is None else d, "tolerances.json")) as f:
        return json.load(f)


def load_golden(name, device="cuda", d=None):
    """meta dict and {array name: tensor} (bf16, f32, f64, i64) of one case of folder d (default:
    the shared one)."""
    import torch
    dtypes = {"bf16": torch.int16, "f32": torch.float32, "f64": torch.float64, "i64": torch.int64}
    base = os.path.join(golden_dir() if d is None else d, name)
    with open(os.path.join(base, "meta.json")) as f:
        meta = json.load(f)
    arrays = {}
    for key, spec in meta["files"].items():
        with open(os.path.join(base, key + ".bin"), "rb") as f:
            raw = bytearray(f.read())
        t = torch.frombuffer(raw, dtype=dtypes[spec["dtype"]]).reshape(spec["shape"]).clone()
        if spec["dtype"] == "bf16":
            t = t.view(torch.bfloat16)  # uint16 bit patterns
        arrays[key] = t.to(device)
    return meta, arrays


def rel_l2(x, ref):
    """||x - ref||_2 / ||ref||_2 in float64 (absolute norm when ref is zero)."""
    x, ref = x.double(), ref.double()
    num = (x - ref).norm().item()
    den = ref.norm().item()
    return num / den if den > 0 else num


def finite(x):
    import torch
    return bool(torch.isfinite(x).all().item())


# ---------------------------------------------------------------------------------------------
# Inputs and the float64 token-by-token reference

def make_inputs(B=1, T=64, H=2, HV=None, K=128, seqlens=None, state_dtype=None, device="cuda",
                g_dtype=None, beta_dtype=None):
    """Random inputs as the benchmark protocol: N(0,1) bf16 q/k/v/g/beta, U[0,1) fp32 A_log and
    dt_bias. `seqlens` packs sequences into one row with cu_seqlens (int64)."""
    import torch
    HV = HV or H
    if seqlens is not None:
        B, T = 1, sum(seqlens)
        cu = torch.tensor([0] + [sum(seqlens[:i + 1]) for i in range(len(seqlens))],
                          dtype=torch.int64, device=device)
        N = len(seqlens)
    else:
        cu, N = None, B
    bf = torch.bfloat16
    d = {
        "q": torch.randn(B, T, H, K, dtype=bf, device=device),
        "k": torch.randn(B, T, H, K, dtype=bf, device=device),
        "v": torch.randn(B, T, HV, K, dtype=bf, device=device),
        "g": torch.randn(B, T, HV, K, device=device).to(g_dtype or bf),
        "beta": torch.randn(B, T, HV, device=device).to(beta_dtype or bf),
        "A_log": torch.rand(HV, dtype=torch.float32, device=device),
        "dt_bias": torch.rand(HV, K, dtype=torch.float32, device=device),
        "cu_seqlens": cu,
        "scale": 1.0 / math.sqrt(K),
    }
    d["initial_state"] = (torch.randn(N, HV, K, K, device=device).to(state_dtype)
                          if state_dtype is not None else None)
    return d


def reference_kda(q, k, v, g, beta, scale, A_log=None, dt_bias=None, lower_bound=-5.0,
                  initial_state=None, cu_seqlens=None, gate_in_kernel=True, beta_sigmoid=True,
                  qk_l2norm=True, allow_neg_eigval=False):
    """float64 recurrence of spec section 1: returns (out [B,T,HV,V], final state [N,HV,V,K])."""
    import torch
    import torch.nn.functional as F
    f64 = torch.float64
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    grp = HV // H
    q = q.to(f64).repeat_interleave(grp, dim=2)
    k = k.to(f64).repeat_interleave(grp, dim=2)
    v, g, beta = v.to(f64), g.to(f64), beta.to(f64)
    if qk_l2norm:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    if gate_in_kernel:
        x = g + (dt_bias.to(f64).reshape(HV, K) if dt_bias is not None else 0.0)
        rate = torch.exp(A_log.to(f64)).view(HV, 1) if A_log is not None else 1.0
        a = -rate * F.softplus(x) if lower_bound is None else lower_bound * torch.sigmoid(rate * x)
    else:
        a = g
    b = torch.sigmoid(beta) if beta_sigmoid else beta
    if allow_neg_eigval:
        b = 2.0 * b
    if cu_seqlens is not None:
        cu = [int(c) for c in cu_seqlens.tolist()]
        seqs = [(0, cu[i], cu[i + 1]) for i in range(len(cu) - 1)]
    else:
        seqs = [(i, 0, T) for i in range(B)]
    N = len(seqs)
    S = (initial_state.to(f64).clone() if initial_state is not None
         else torch.zeros(N, HV, V, K, dtype=f64, device=q.device))
    o = torch.zeros(B, T, HV, V, dtype=f64, device=q.device)
    for n, (bi, start, end) in enumerate(seqs):
        s = S[n]
        for t in range(start, end):
            s = s * torch.exp(a[bi, t]).unsqueeze(1)                    # decay key columns
            kt = k[bi, t]
            err = v[bi, t] - (s * kt.unsqueeze(1)).sum(-1)              # v - S k
            s = s + (b[bi, t].unsqueeze(-1) * err).unsqueeze(-1) * kt.unsqueeze(1)
            o[bi, t] = scale * (s * q[bi, t].unsqueeze(1)).sum(-1)
        S[n] = s
    return o, S


def run_fwd(flash_kda, d, lower_bound=-5.0, final_dtype=None, **kw):
    """flash_kda.fwd on a make_inputs dict; returns (out, final_state or None)."""
    import torch
    out = torch.empty_like(d["v"], memory_format=torch.contiguous_format)
    fs = None
    if final_dtype is not None:
        N = d["cu_seqlens"].numel() - 1 if d["cu_seqlens"] is not None else d["q"].shape[0]
        HV, K = d["v"].shape[2], d["q"].shape[3]
        fs = torch.full((N, HV, K, K), float("nan"), dtype=final_dtype, device=d["q"].device)
    flash_kda.fwd(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"],
                  d["dt_bias"], lower_bound, initial_state=d["initial_state"], final_state=fs,
                  cu_seqlens=d["cu_seqlens"], **kw)
    return out, fs
