"""How many routed experts the busiest GPU reads per MoE layer under expert parallelism, for a batch of tokens.

Model: each of `tokens` tokens picks `top_k` distinct experts of `E` uniformly at random (the router's standard
uniform assumption, as `roofline.expected_distinct_experts`); expert parallelism places whole experts on `G`
ranks, the first E mod G ranks one expert more (vLLM's placement, optigate.plan.memory.weight_footprint). A step
waits for its busiest rank, so what bounds it is E[max over ranks of the distinct experts that rank must read],
not the balanced share E[distinct] / G.

Computed exactly, in two parts:
1. the number D of distinct experts the batch touches: a Markov chain over tokens (a token adds j new experts with
   the hypergeometric probability C(E - d, j) C(d, k - j) / C(E, k));
2. given D, the touched set is a uniform D-subset of the experts (routing is exchangeable over experts), so the
   per-rank counts are multivariate hypergeometric, and P(max <= t | D) = [x^D] prod_g sum_{i<=t} C(m_g, i) x^i
   / C(E, D) (the generating function of subsets with at most t experts on each rank).
E[max] = sum_D P(D) sum_{t>=0} (1 - P(max <= t | D)). Real routers are skewed (hot experts), so the busiest GPU
reads at least this much in practice, usually more: this stays a lower bound's input, not a prediction.
"""

from __future__ import annotations

import math
from functools import lru_cache

#: Beyond this many tokens every expert is touched with probability 1 - 1e-12 or more: the busiest rank reads all
#: it holds (the chain is not walked further).
_ALL_TOUCHED = 1e-12


def rank_sizes(num_experts: int, ranks: int) -> tuple[int, ...]:
    """Experts per rank under vLLM's placement: the first E mod G ranks hold one more."""
    base, extra = divmod(num_experts, ranks)
    return tuple(base + 1 if rank < extra else base for rank in range(ranks))


@lru_cache(maxsize=64)
def _max_given_distinct(num_experts: int, ranks: int) -> tuple[float, ...]:
    """E[max over ranks of the touched experts on that rank | D touched], for D = 0..E."""
    sizes = rank_sizes(num_experts, ranks)
    expected = [0.0] * (num_experts + 1)
    subsets = [math.comb(num_experts, d) for d in range(num_experts + 1)]
    for t in range(max(sizes)):  # P(max > t | D), summed over t, is E[max | D]
        poly = [1]
        for size in sizes:
            factor = [math.comb(size, i) for i in range(min(t, size) + 1)]
            product = [0] * (len(poly) + len(factor) - 1)
            for i, a in enumerate(poly):
                if a:
                    for j, b in enumerate(factor):
                        product[i + j] += a * b
            poly = product
        for d in range(num_experts + 1):
            at_most_t = poly[d] if d < len(poly) else 0
            expected[d] += 1 - at_most_t / subsets[d]
    return tuple(expected)


@lru_cache(maxsize=64)
def _distinct_distributions(num_experts: int, top_k: int) -> tuple[tuple[float, ...], ...]:
    """P(D = d) after 1, 2, ... tokens, until every expert is touched almost surely."""
    choose_k = math.comb(num_experts, top_k)
    moves = [
        [math.comb(num_experts - d, j) * math.comb(d, top_k - j) / choose_k for j in range(top_k + 1)]
        for d in range(num_experts + 1)
    ]
    current = [0.0] * (num_experts + 1)
    current[0] = 1.0
    distributions = []
    while True:
        following = [0.0] * (num_experts + 1)
        for d, p in enumerate(current):
            if p:
                for j, move in enumerate(moves[d]):
                    if move and d + j <= num_experts:
                        following[d + j] += p * move
        current = following
        distributions.append(tuple(current))
        if 1 - current[num_experts] < _ALL_TOUCHED:
            return tuple(distributions)


def expected_busiest_rank_experts(num_experts: int, top_k: int, ranks: int, tokens: int) -> float:
    """Expected routed experts the busiest of `ranks` expert-parallel ranks reads per MoE layer when `tokens`
    tokens each pick `top_k` of `num_experts` uniformly at random (module docstring)."""
    if tokens <= 0 or num_experts <= 0:
        return 0.0
    if ranks <= 1:
        top_k = min(top_k, num_experts)
        return num_experts * (1 - (1 - top_k / num_experts) ** tokens)
    distributions = _distinct_distributions(num_experts, min(top_k, num_experts))
    if tokens > len(distributions):
        return float(max(rank_sizes(num_experts, ranks)))
    given = _max_given_distinct(num_experts, ranks)
    return sum(p * given[d] for d, p in enumerate(distributions[tokens - 1]) if p)


def expected_balanced_rank_experts(num_experts: int, top_k: int, ranks: int, tokens: int) -> float:
    """The balanced share the busiest rank is often assumed to read: E[distinct experts] / ranks."""
    return expected_busiest_rank_experts(num_experts, top_k, 1, tokens) / max(1, ranks)
