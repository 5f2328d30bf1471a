"""Who holds what when a batch is sharded along tokens over ranks (docs/design.md section 3.4).

Pure Python (no torch), so that it is tested anywhere. Rank r holds tokens
[offsets[r], offsets[r+1]) of every sequence of a fixed batch (each row split the same way), or of
the packed token stream of a varlen batch (global ``cu_seqlens``). Per rank: its local sequences,
whether the first one started on an earlier rank (its start state comes from the exchange) and
whether the last one continues on a later rank (this rank sends its transition), the ranks whose
exchanged blocks chain into its first sequence, and, per sequence, the rank holding its last token
(its final state).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple


@dataclass(frozen=True)
class ShardPlan:
    rank: int
    world_size: int
    token_start: int              # this rank's tokens [token_start, token_end) (per row when fixed)
    token_end: int
    num_sequences: int            # N of the whole batch
    seq_lo: int                   # global sequences [seq_lo, seq_hi) with tokens on this rank
    seq_hi: int
    local_cu: Optional[Tuple[int, ...]]  # varlen: local cu_seqlens (None for a fixed batch)
    continued: bool               # the first local sequence started on an earlier rank
    continues: bool               # the last local sequence goes on to a later rank
    chain: Tuple[int, ...]        # ranks (increasing) whose exchanged block chains into it
    owner: Tuple[int, ...]        # per sequence: the rank holding its last token (-1: empty sequence)

    @property
    def num_local(self) -> int:
        return self.seq_hi - self.seq_lo

    @property
    def num_tokens(self) -> int:
        return self.token_end - self.token_start

    def owned(self) -> Tuple[int, ...]:
        """Global sequences whose final state this rank produces."""
        return tuple(n for n in range(self.seq_lo, self.seq_hi) if self.owner[n] == self.rank)


def _offsets(shard_sizes: Sequence[int]) -> Tuple[int, ...]:
    out = [0]
    for s in shard_sizes:
        if s < 0:
            raise ValueError(f"shard_sizes: expected non-negative token counts, got {list(shard_sizes)}")
        out.append(out[-1] + int(s))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def plan_fixed(num_sequences: int, shard_sizes: Tuple[int, ...], rank: int) -> ShardPlan:
    """A fixed batch [B, T]: every rank holds tokens [offsets[r], offsets[r+1]) of each row."""
    off = _offsets(shard_sizes)
    R = len(shard_sizes)
    has = [shard_sizes[j] > 0 for j in range(R)]
    here = has[rank]
    last = max((j for j in range(R) if has[j]), default=-1)
    chain = tuple(j for j in range(rank) if has[j]) if here else ()
    owner = tuple(last if last >= 0 else -1 for _ in range(num_sequences))
    return ShardPlan(rank=rank, world_size=R, token_start=off[rank], token_end=off[rank + 1],
                     num_sequences=num_sequences, seq_lo=0, seq_hi=num_sequences if here else 0,
                     local_cu=None, continued=bool(chain),
                     continues=here and any(has[j] for j in range(rank + 1, R)), chain=chain, owner=owner)


@functools.lru_cache(maxsize=64)
def plan_varlen(cu_seqlens: Tuple[int, ...], shard_sizes: Tuple[int, ...], rank: int) -> ShardPlan:
    """A packed batch (global cu_seqlens [N+1]) whose token stream is split by shard_sizes."""
    cu = [int(c) for c in cu_seqlens]
    N = len(cu) - 1
    off = _offsets(shard_sizes)
    R = len(shard_sizes)
    if N < 1 or cu[0] != 0 or any(cu[i + 1] < cu[i] for i in range(N)):
        raise ValueError(f"cu_seqlens: expected [0, ..., T_total] non-decreasing, got {cu[:8]}{'...' if N > 7 else ''}")
    if cu[-1] != off[-1]:
        raise ValueError(f"cu_seqlens: the packed length cu_seqlens[-1] = {cu[-1]} must equal the total of the "
                         f"shards, {off[-1]} = sum(shard_sizes) (shard_sizes {list(shard_sizes)})")

    def overlap(n, j):
        return min(cu[n + 1], off[j + 1]) > max(cu[n], off[j])

    def rank_of_token(t):
        for j in range(R):
            if off[j] <= t < off[j + 1]:
                return j
        raise AssertionError(t)

    owner = tuple(rank_of_token(cu[n + 1] - 1) if cu[n + 1] > cu[n] else -1 for n in range(N))
    t0, t1 = off[rank], off[rank + 1]
    local = [n for n in range(N) if overlap(n, rank)]
    if not local:
        return ShardPlan(rank=rank, world_size=R, token_start=t0, token_end=t1, num_sequences=N,
                         seq_lo=0, seq_hi=0, local_cu=(0,), continued=False, continues=False, chain=(),
                         owner=owner)
    lo, hi = local[0], local[-1] + 1
    local_cu = [0] + [min(cu[n + 1], t1) - t0 for n in range(lo, hi)]
    # Sequences strictly inside [lo, hi) have tokens here; empty ones between them keep length 0.
    continued = cu[lo] < t0
    chain = tuple(j for j in range(rank) if overlap(lo, j)) if continued else ()
    return ShardPlan(rank=rank, world_size=R, token_start=t0, token_end=t1, num_sequences=N, seq_lo=lo,
                     seq_hi=hi, local_cu=tuple(local_cu), continued=continued, continues=cu[hi] > t1,
                     chain=chain, owner=owner)
