"""SageMaker's managed benchmark beside the gate's own (gate.benchmark.cross_check: sagemaker): its settings and
the workload it runs at each level the gate measures (no CDK here; optigate.constructs.gate.cross_check runs it)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from optigate import naming

#: How often and how long the gate polls a managed benchmark job: one level of one side is a few minutes of
#: load plus the job's own start-up; after an hour the gate stops it and reports the cross-check unavailable.
CROSS_CHECK_POLL_SECONDS = 60
CROSS_CHECK_MAX_POLLS = 60


@dataclass(frozen=True)
class CrossCheck:
    """SageMaker's managed benchmark (CreateAIBenchmarkJob, NVIDIA AIPerf) beside the gate's own, per level.

    :param tokenizer: the Hugging Face tokenizer id AIPerf downloads (config rules resolve it).
    :param tolerance: gate.benchmark.cross_check_tolerance, for the report.
    """

    tokenizer: str
    tolerance: dict[str, float]
    poll_seconds: int = CROSS_CHECK_POLL_SECONDS
    max_polls: int = CROSS_CHECK_MAX_POLLS


@dataclass(frozen=True)
class CrossCheckLevel:
    """One benchmarked level as the managed job runs it: one AIWorkloadConfig (one concurrency each)."""

    concurrency: int  # total streams, as optigate's benchmark measures the level
    request_count: int  # one block's requests, every worker's together
    workload: str  # the WorkloadSpec's Inline JSON
    config_name: str  # the AIWorkloadConfig's name (lowercase, with the workload's hash)


def workload_levels(
    check: CrossCheck,
    team: str,
    environment: str,
    levels: Iterable[tuple[int, int]],
    prompt_tokens: int,
    max_new_tokens: int,
) -> tuple[CrossCheckLevel, ...]:
    """The managed benchmark's workload per level, `levels` being (total concurrency, one block's requests): the
    same prompt and output lengths, streaming, total concurrency and one block's requests as optigate's benchmark
    of that level (BenchmarkPlan.items), fixed lengths (stddev 0) as optigate sends them. AIPerf parameters:
    the SageMaker SDK's `Workload.synthetic` (sagemaker/serve/ai_inference_recommender/workload.py) and
    https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-workload-config.html.

    The requests are OpenAI chat completions (`api_standard: openai`; AIPerf's chat payload sends
    `max_completion_tokens`, ai-dynamo/aiperf aiperf/clients/openai/openai_chat.py), which every engine mode optigate
    renders for LMI accepts (optigate.serving.engine_mode): async mode through vLLM's own OpenAIServingChat, the
    rolling batch through vLLM's ChatCompletionRequest, reading `max_completion_tokens` (djl-serving 0.34.0-dlc,
    djl_python/chat_completions/vllm_chat_utils.py). In async mode optigate's own benchmark sends chat requests too
    (optigate.bench.core.payloads.DEFAULT_SCHEMA), so both measure the same request path."""
    out = []
    for concurrency, requests in levels:
        spec = {
            "benchmark": {"type": "aiperf"},
            "parameters": {
                "tokenizer": check.tokenizer,
                "concurrency": concurrency,
                "request_count": requests,
                "prompt_input_tokens_mean": prompt_tokens,
                "prompt_input_tokens_stddev": 0,
                "output_tokens_mean": max_new_tokens,
                "output_tokens_stddev": 0,
                "streaming": True,
            },
            "tooling": {"api_standard": "openai"},
        }
        workload = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        name = naming.workload_config_name(team, environment, concurrency, workload)
        out.append(CrossCheckLevel(concurrency, requests, workload, name))
    return tuple(out)
