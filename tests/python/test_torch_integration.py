"""PyTorch integration of torch.ops.flash_kda.fwd: opcheck, torch.compile, CUDA graphs, streams."""
import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402

import flash_kda  # noqa: E402


def _op_args(d, out, fs, workspace=None, lower_bound=-5.0):
    """Positional arguments in schema order of flash_kda::fwd."""
    return (d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"],
            lower_bound, d["initial_state"], fs, d["cu_seqlens"], workspace, True, True, True, False, False)


@pytest.mark.parametrize("varlen", [False, True])
def test_opcheck(varlen):
    d = (U.make_inputs(seqlens=[20, 13], H=2, state_dtype=torch.float32) if varlen
         else U.make_inputs(B=2, T=24, H=2, state_dtype=torch.float32))
    out = torch.empty_like(d["v"])
    fs = torch.empty_like(d["initial_state"])
    torch.library.opcheck(torch.ops.flash_kda.fwd.default, _op_args(d, out, fs))


def test_workspace_size_op():
    d = U.make_inputs(B=1, T=24, H=2)
    args = (d["q"], d["k"], d["v"], d["g"], d["beta"], d["A_log"], d["dt_bias"], -5.0, None, None, None,
            True, True, True, False)
    n = torch.ops.flash_kda.get_workspace_size(*args)
    meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    assert isinstance(n, int) and n >= 0
    assert torch.ops.flash_kda.get_workspace_size(*meta) == n == flash_kda.get_workspace_size(*args[:7])


def test_torch_compile_fullgraph_matches_eager():
    d = U.make_inputs(seqlens=[50, 77], H=2, state_dtype=torch.float32)

    def f(q, k, v, g, beta, A_log, dt_bias, h0, cu):
        out = torch.empty_like(v)
        ht = torch.empty_like(h0)
        flash_kda.fwd(q, k, v, g, beta, d["scale"], out, A_log, dt_bias, -5.0,
                      initial_state=h0, final_state=ht, cu_seqlens=cu)
        return out.float() * 2.0, ht

    args = [d[n] for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state", "cu_seqlens")]
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    eo, eh = f(*args)
    co, ch = compiled(*args)
    assert torch.equal(eo, co) and torch.equal(eh, ch)
    # strided q (a slice of a fused projection) inside the compiled region as well
    qk = torch.randn(1, 127, 2, 256, dtype=torch.bfloat16, device="cuda")
    args2 = [qk[..., :128], qk[..., 128:]] + args[2:]
    assert all(torch.equal(a, b) for a, b in zip(f(*args2), compiled(*args2)))


def _captured(run):
    """`run` warmed up twice on a side stream, then captured: (the graph, what the captured call returned)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = run()
    return graph, result


@pytest.mark.parametrize("caller_workspace", [True, False])
def test_cuda_graph_capture_and_replay(caller_workspace):
    d = U.make_inputs(seqlens=[100, 28, 64], H=2, state_dtype=torch.float32)
    out = torch.empty_like(d["v"])
    ht = torch.empty_like(d["initial_state"])
    ws = None
    if caller_workspace:
        names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias")
        size = flash_kda.get_workspace_size(*[d[n] for n in names], -5.0, d["initial_state"], ht, d["cu_seqlens"])
        ws = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")

    def run():
        flash_kda.fwd(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"],
                      -5.0, initial_state=d["initial_state"], final_state=ht, cu_seqlens=d["cu_seqlens"],
                      workspace=ws)

    graph, _ = _captured(run)

    fresh = U.make_inputs(seqlens=[100, 28, 64], H=2, state_dtype=torch.float32)
    for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state"):
        d[n].copy_(fresh[n])
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    eager = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    assert torch.equal(out, eager[0]) and torch.equal(ht, eager[1])


def test_runs_on_current_stream():
    d = U.make_inputs(B=1, T=300, H=4, state_dtype=torch.float32)
    expected = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    q_late = torch.zeros_like(d["q"])
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    out = torch.empty_like(d["v"])
    ht = torch.empty_like(d["initial_state"])
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before q_late gets its values
        q_late.copy_(d["q"])
        flash_kda.fwd(q_late, d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"], -5.0,
                      initial_state=d["initial_state"], final_state=ht)
    side.synchronize()
    assert torch.equal(out, expected[0]) and torch.equal(ht, expected[1]), \
        "fwd did not run on the current (side) stream"


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_second_device_uses_its_own_stream_and_guard():
    with torch.cuda.device(1):
        d = U.make_inputs(B=1, T=64, H=2, state_dtype=torch.float32, device="cuda:1")
        expected = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    with torch.cuda.device(0):
        got = U.run_fwd(flash_kda, d, final_dtype=torch.float32)  # current device 0, tensors on 1
    torch.cuda.synchronize(1)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_chunk_kda_use_graph_replays_with_new_cu_seqlens_contents():
    # FLA's use_graph protocol: cu_seqlens padded with zero-length tail sequences to max_num_seqs + 1
    # entries, the call captured once, then replayed after only cu_seqlens' contents (and the inputs)
    # change. Each replay equals an eager call on the new contents; the padding sequences keep their
    # initial states; a cu_seqlens of another length than max_num_seqs + 1 is refused by name.
    max_num_seqs = 5
    d = U.make_inputs(seqlens=[100, 28, 64], H=2, state_dtype=torch.float32)
    T = d["q"].shape[1]
    cu = torch.tensor([0, 100, 128, T, T, T], dtype=torch.int64, device="cuda")
    h0 = torch.randn(max_num_seqs, 2, 128, 128, device="cuda")

    def run():
        with torch.inference_mode():
            return flash_kda.chunk_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], scale=d["scale"], initial_state=h0,
                                       output_final_state=True, cu_seqlens=cu, A_log=d["A_log"],
                                       dt_bias=d["dt_bias"].reshape(-1), lower_bound=-5.0, safe_gate=True,
                                       use_gate_in_kernel=True, use_qk_l2norm_in_kernel=True,
                                       use_beta_sigmoid_in_kernel=True, transpose_state_layout=True,
                                       use_graph=True, max_num_seqs=max_num_seqs)

    graph, (o_static, h_static) = _captured(run)
    for bounds in ([0, 40, 150, T, T, T], [0, T, T, T, T, T], [0, 16, 17, 100, 180, T]):
        cu.copy_(torch.tensor(bounds, dtype=torch.int64))
        fresh = U.make_inputs(seqlens=[100, 28, 64], H=2, state_dtype=torch.float32)
        for n in ("q", "k", "v", "g", "beta"):
            d[n].copy_(fresh[n])
        graph.replay()
        torch.cuda.synchronize()
        o_eager, h_eager = run()
        print(f"\n[use_graph] cu_seqlens {bounds}: replay equals eager {torch.equal(o_static, o_eager)}")
        assert torch.equal(o_static, o_eager) and torch.equal(h_static, h_eager)
        for n in range(max_num_seqs):
            if bounds[n + 1] == bounds[n]:
                assert torch.equal(h_static[n], h0[n]), f"padding sequence {n} changed its state"
    with pytest.raises(ValueError, match="max_num_seqs"):
        with torch.inference_mode():
            flash_kda.chunk_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], cu_seqlens=cu, A_log=d["A_log"],
                                dt_bias=d["dt_bias"].reshape(-1), lower_bound=-5.0, use_graph=True, max_num_seqs=4)
