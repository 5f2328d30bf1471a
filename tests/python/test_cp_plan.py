"""Who holds what across ranks (python/flash_kda/_cp_plan.py): needs neither torch nor a GPU.

Loads the module from its file (importing flash_kda would import torch). For fixed and packed
batches over 1 to 5 ranks, including ranks without tokens, empty sequences and sequences spanning
several ranks: every token of every sequence is on exactly one rank, local cu_seqlens describe the
rank's tokens, a rank's first sequence chains exactly through the earlier ranks holding it (each of
which sends that sequence, its last one), and every non-empty sequence has one owner, the rank of
its last token.
"""
import importlib.util
import os
import random
import sys

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "python", "flash_kda", "_cp_plan.py")
_spec = importlib.util.spec_from_file_location("_cp_plan", _PATH)
P = importlib.util.module_from_spec(_spec)
sys.modules["_cp_plan"] = P  # dataclasses look their module up
_spec.loader.exec_module(P)


def _offsets(sizes):
    out = [0]
    for s in sizes:
        out.append(out[-1] + s)
    return out


def check_varlen(cu, sizes):
    R, N = len(sizes), len(cu) - 1
    off = _offsets(sizes)
    plans = [P.plan_varlen(tuple(cu), tuple(sizes), r) for r in range(R)]
    covered = [0] * cu[-1]
    for r, p in enumerate(plans):
        assert (p.token_start, p.token_end) == (off[r], off[r + 1])
        assert p.local_cu[0] == 0 and p.local_cu[-1] == (sizes[r] if p.num_local else 0)
        assert list(p.local_cu) == sorted(p.local_cu)
        for i, n in enumerate(range(p.seq_lo, p.seq_hi)):
            a, b = max(cu[n], off[r]), min(cu[n + 1], off[r + 1])
            assert p.local_cu[i + 1] - p.local_cu[i] == max(b - a, 0), (r, n)
            for t in range(a, b):
                covered[t] += 1
        if p.num_local:
            assert p.continued == (cu[p.seq_lo] < off[r])
            assert p.continues == (cu[p.seq_hi] > off[r + 1])
        # The chain: the earlier ranks holding the first sequence, each ending with it and sending it.
        if p.continued:
            first = p.seq_lo
            expect = [j for j in range(r) if min(cu[first + 1], off[j + 1]) > max(cu[first], off[j])]
            assert list(p.chain) == expect and expect
            for j in expect:
                q = plans[j]
                assert q.continues and q.seq_hi - 1 == first, (r, j)
        else:
            assert p.chain == ()
        for n in p.owned():
            assert cu[n + 1] - 1 < off[r + 1] and cu[n + 1] - 1 >= off[r]
    assert covered == [1] * cu[-1]
    for n in range(N):
        owners = [r for r, p in enumerate(plans) if n in p.owned()]
        assert owners == ([] if cu[n + 1] == cu[n] else [plans[0].owner[n]]), n
    return plans


def test_varlen_examples():
    plans = check_varlen([0, 100, 700, 1000, 1000, 1100], [350, 450, 300])
    assert [p.continued for p in plans] == [False, True, True]
    assert [p.chain for p in plans] == [(), (0,), (1,)]
    assert plans[0].owner == (0, 1, 2, -1, 2)
    plans = check_varlen([0, 50, 1000, 1200], [300, 300, 300, 300])  # one sequence over 4 ranks
    assert plans[3].chain == (0, 1, 2) and plans[3].seq_lo == 1
    assert [p.num_local for p in plans] == [2, 1, 1, 2]


def test_varlen_ranks_without_tokens_and_boundaries_on_sequence_ends():
    plans = check_varlen([0, 10, 20, 20, 30], [10, 0, 10, 10])
    assert plans[1].num_local == 0 and plans[1].local_cu == (0,)
    assert not any(p.continued for p in plans)
    plans = check_varlen([0, 5, 25], [10, 0, 0, 15])
    assert plans[3].chain == (0,)


@pytest.mark.parametrize("seed", range(40))
def test_varlen_random(seed):
    rng = random.Random(seed)
    N = rng.randint(1, 7)
    lens = [rng.choice([0, 1, 3, 16, 40, 100]) for _ in range(N)]
    total = sum(lens)
    cu = [0]
    for x in lens:
        cu.append(cu[-1] + x)
    R = rng.randint(1, 5)
    cuts = sorted(rng.randint(0, total) for _ in range(R - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [total])]
    check_varlen(cu, sizes)


def test_fixed_batches():
    for sizes in ([100, 100], [0, 50, 0, 50], [7], [0, 0]):
        plans = [P.plan_fixed(3, tuple(sizes), r) for r in range(len(sizes))]
        with_tokens = [r for r, s in enumerate(sizes) if s > 0]
        for r, p in enumerate(plans):
            assert p.num_local == (3 if sizes[r] else 0)
            assert list(p.chain) == ([j for j in with_tokens if j < r] if sizes[r] else [])
            assert p.continues == (sizes[r] > 0 and any(j > r for j in with_tokens))
            assert p.owned() == ((0, 1, 2) if with_tokens and r == with_tokens[-1] else ())


def test_bad_cu_seqlens():
    with pytest.raises(ValueError, match="sum\\(shard_sizes\\)"):
        P.plan_varlen((0, 10, 30), (10, 10), 0)
    with pytest.raises(ValueError, match="non-decreasing"):
        P.plan_varlen((0, 10, 5), (5,), 0)
