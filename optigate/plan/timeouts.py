"""SageMaker's download and start-up timeouts sized to the weights the endpoint downloads (the checkpoint as
stored, not as served: a bf16 checkpoint quantized to fp8 at start-up downloads and loads all 16 bits): the
default, and the minimum below which a team's explicit value is refused.

One sizing for both: S3 to the instance at a conservative ~100 MB/s (10 s per GB), loading, compilation
and CUDA-graph capture at 15 s per GB. The minimum is that per-GB time alone; the default adds a fixed
600 s allowance for the container's own start. Both stay within SageMaker's 60-3600 s range, so a model
whose per-GB time exceeds an hour gets the API's maximum as both default and minimum.
"""

from __future__ import annotations

import math

from optigate.config.models import TIMEOUT_MAX_SECONDS, TIMEOUT_MIN_SECONDS

DOWNLOAD_SECONDS_BASE, DOWNLOAD_SECONDS_PER_GB = 600, 10
STARTUP_SECONDS_BASE, STARTUP_SECONDS_PER_GB = 600, 15

DOWNLOAD_FIELD = "model_data_download_timeout_seconds"
STARTUP_FIELD = "container_startup_health_check_timeout_seconds"


def _clamp_timeout(seconds: float) -> int:
    return int(min(TIMEOUT_MAX_SECONDS, max(TIMEOUT_MIN_SECONDS, math.ceil(seconds / 10) * 10)))


def sized_timeouts(weights_gb: float) -> tuple[int, int]:
    """(download, startup health check) seconds for a model with this many GB of weights: the defaults."""
    download = _clamp_timeout(DOWNLOAD_SECONDS_BASE + DOWNLOAD_SECONDS_PER_GB * weights_gb)
    startup = _clamp_timeout(STARTUP_SECONDS_BASE + STARTUP_SECONDS_PER_GB * weights_gb)
    return download, startup


def minimum_timeouts(weights_gb: float) -> tuple[int, int]:
    """(download, startup health check) seconds below which the weights cannot be downloaded or loaded."""
    return _clamp_timeout(DOWNLOAD_SECONDS_PER_GB * weights_gb), _clamp_timeout(STARTUP_SECONDS_PER_GB * weights_gb)


def timeout_refusals(weights_gb: float, download: int | None, startup: int | None) -> dict[str, str]:
    """Explicit timeouts below the minimum for the weights, by field name, with the message."""
    minimum = dict(zip((DOWNLOAD_FIELD, STARTUP_FIELD), minimum_timeouts(weights_gb), strict=True))
    default = dict(zip((DOWNLOAD_FIELD, STARTUP_FIELD), sized_timeouts(weights_gb), strict=True))
    rate = {DOWNLOAD_FIELD: DOWNLOAD_SECONDS_PER_GB, STARTUP_FIELD: STARTUP_SECONDS_PER_GB}
    refused = {}
    for field, value in ((DOWNLOAD_FIELD, download), (STARTUP_FIELD, startup)):
        if value is not None and TIMEOUT_MIN_SECONDS <= value < minimum[field]:
            refused[field] = (
                f"{value} s is below the {minimum[field]} s that {weights_gb:.0f} GB of downloaded weights need "
                f"({rate[field]} s per GB); use at least {minimum[field]}, or leave it unset for {default[field]} s"
            )
    return refused


def startup_quantization_seconds(downloaded_gb: float, served_gb: float) -> int:
    """What quantizing at start-up adds to every cold start and scale-out, against a checkpoint stored as served
    (what the gate's optimization job writes): the extra GB downloaded and loaded, at the per-GB rates above.

    An estimate at optigate's own conservative rates, not a measurement: djl-serving's vLLM guide says only that
    "runtime quantization adds additional overhead to the endpoint startup time" and recommends pre-quantizing
    (serving/docs/lmi/user_guides/vllm_user_guide.md, "Quantization Support"). vLLM's FP8 quantization of the
    loaded layers is a per-tensor scale and cast on the GPU, not counted separately."""
    extra = max(0.0, downloaded_gb - served_gb)
    return int(math.ceil(extra * (DOWNLOAD_SECONDS_PER_GB + STARTUP_SECONDS_PER_GB) / 10) * 10)
