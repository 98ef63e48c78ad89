"""The emulated server's cost model, one place for the emulator (which draws from it) and for the truth
(optigate.emulator.truth, which predicts from it).

- Tokens: the emulator counts a prompt's tokens as its words (optigate's synthetic prompts are one token per word).
- Prefill: `ttft_ms_per_prompt_token` per prompt token not found in the prefix cache.
- Prefix cache (vLLM's automatic prefix caching): prompts are cut into blocks of PREFIX_BLOCK_TOKENS (vLLM's
  default block size); a block is a hit when it and every block before it were seen before; the last prompt token
  is always computed (so a prompt fully seen still prefills one token). Counted in tokens, as
  `vllm:prefix_cache_queries` / `vllm:prefix_cache_hits` count them.
- Speculative decoding (`num_speculative_tokens` k, `acceptance_rate` a): each decode step proposes k draft tokens;
  each is accepted with probability a until the first rejection (a is per draft, given the ones before it were
  accepted; vLLM's reported rate, accepted / drafted, is lower: `reported_acceptance`), and the step emits the
  accepted ones plus one (the target's own token). Expected tokens per step: (1 - a^(k+1)) / (1 - a)
  (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding", eq. 1).
  A step costs `itl_ms` + k × `draft_ms_per_token` + (running - 1) × `itl_ms_per_active_stream` × (k + 1):
  every sequence in the batch verifies k + 1 tokens, so the batch-dependent part of a step grows k + 1 times.
  At low load the step is barely longer than a plain one and emits several tokens (faster); at high load the
  batch term dominates and the k + 1 verified tokens cost more than the tokens they yield (slower).
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from optigate.emulator.config import Behaviour

PREFIX_BLOCK_TOKENS = 16  # vLLM's default --block-size


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt of a request body (chat: every message's content)."""
    if "messages" in body:
        messages = body.get("messages") or []
        return " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    return str(body.get("inputs") or body.get("prompt") or "")


def prompt_words(body: dict[str, Any]) -> list[str]:
    """The prompt's tokens as the emulator counts them: its words."""
    return prompt_text(body).split()


def accepted_probabilities(acceptance_rate: float, draft_tokens: int) -> list[float]:
    """P(j drafts accepted) for j = 0..k: a^j (1 - a) below k, a^k for all of them."""
    a, k = acceptance_rate, draft_tokens
    return [a**j * (1 - a) for j in range(k)] + [a**k]


def tokens_per_step(acceptance_rate: float, draft_tokens: int) -> float:
    """Expected tokens a speculative step emits: sum over j of (j + 1) P(j) = (1 - a^(k+1)) / (1 - a)."""
    return sum((j + 1) * p for j, p in enumerate(accepted_probabilities(acceptance_rate, draft_tokens)))


def reported_acceptance(acceptance_rate: float, draft_tokens: int) -> float:
    """What vLLM reports as the acceptance rate, accepted / drafted tokens (vllm:spec_decode_num_accepted_tokens
    over vllm:spec_decode_num_draft_tokens): (tokens per step - 1) / k, below the per-draft `acceptance_rate`
    because the drafts after a rejection are never accepted."""
    return (tokens_per_step(acceptance_rate, draft_tokens) - 1) / draft_tokens


def draw_accepted(behaviour: Behaviour, rng: random.Random) -> int:
    """Drafts accepted in one step."""
    accepted = 0
    while accepted < behaviour.num_speculative_tokens and rng.random() < behaviour.acceptance_rate:
        accepted += 1
    return accepted


def step_overhead_ms(behaviour: Behaviour, running: int) -> float:
    """What one decode step costs beyond its `itl_ms` draw, with `running` requests in the batch."""
    k = behaviour.num_speculative_tokens
    return k * behaviour.draft_ms_per_token + behaviour.itl_ms_per_active_stream * (running - 1) * (k + 1)


def prefill_ms(behaviour: Behaviour, uncached_tokens: int) -> float:
    return behaviour.ttft_ms_per_prompt_token * uncached_tokens


class PrefixCache:
    """Block hashes of prompts seen, least recently used first; `capacity_blocks` None: unbounded."""

    def __init__(self, capacity_blocks: int | None = None) -> None:
        self.capacity_blocks = capacity_blocks
        self.blocks: OrderedDict[str, None] = OrderedDict()

    @staticmethod
    def _hashes(words: Sequence[str]) -> list[str]:
        hashes: list[str] = []
        parent = ""
        for start in range(0, len(words) - len(words) % PREFIX_BLOCK_TOKENS, PREFIX_BLOCK_TOKENS):
            block = "\x1f".join(words[start : start + PREFIX_BLOCK_TOKENS])
            parent = hashlib.sha256(f"{parent}\x1e{block}".encode()).hexdigest()
            hashes.append(parent)
        return hashes

    def lookup_and_insert(self, words: Sequence[str]) -> int:
        """The prompt's cached tokens (whole blocks, leaving the last token to compute); its blocks are then
        cached (the prefill computes them)."""
        hashes = self._hashes(words)
        hit_blocks = 0
        for digest in hashes:
            if digest not in self.blocks:
                break
            hit_blocks += 1
        cached = min(hit_blocks * PREFIX_BLOCK_TOKENS, max(0, len(words) - 1))
        cached -= cached % PREFIX_BLOCK_TOKENS
        for digest in hashes:
            self.blocks[digest] = None
            self.blocks.move_to_end(digest)
        while self.capacity_blocks is not None and len(self.blocks) > self.capacity_blocks:
            self.blocks.popitem(last=False)
        return cached
