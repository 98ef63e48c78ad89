"""An fmeval ModelRunner for SageMaker endpoints serving LMI, with an `endpoint_url` override.

Request shapes: LMI's `inputs` + `parameters` (response `generated_text`) or its `messages`
(OpenAI) schema (response `choices[0].message.content`); streaming (text reassembled from the
event stream) or not; `TargetVariant` / `InferenceComponentName`; throttling retried a bounded
number of times with backoff. The boto3 client is created lazily so Ray can pickle the runner.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from fmeval.model_runners.model_runner import ModelRunner

RETRYABLE = {"ThrottlingException", "ServiceUnavailable", "InternalFailure"}


@dataclass(frozen=True)
class EndpointSpec:
    """`name`, `name@variant` or `name#inference-component`."""

    endpoint_name: str
    target_variant: str | None = None
    inference_component: str | None = None

    @classmethod
    def parse(cls, text: str) -> EndpointSpec:
        if "#" in text:
            name, component = text.split("#", 1)
            return cls(name, inference_component=component)
        if "@" in text:
            name, variant = text.split("@", 1)
            return cls(name, target_variant=variant)
        return cls(text)


class SageMakerEndpointRunner(ModelRunner):
    def __init__(
        self,
        endpoint: EndpointSpec,
        *,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        schema: str = "inputs",
        stream: bool = False,
        max_new_tokens: int = 64,
        max_attempts: int = 5,
    ) -> None:
        super().__init__(content_template='{"inputs": $prompt}', output="generated_text")
        self.endpoint = endpoint
        self.region = region
        self.endpoint_url = endpoint_url
        self.schema = schema
        self.stream = stream
        self.max_new_tokens = max_new_tokens
        self.max_attempts = max_attempts
        self._client = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def client(self):
        if self._client is None:
            self._client = boto3.client(
                "sagemaker-runtime",
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                config=Config(retries={"max_attempts": 1}, read_timeout=300),
            )
        return self._client

    def body(self, prompt: str) -> bytes:
        if self.schema == "messages":
            payload: dict[str, Any] = {
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": self.max_new_tokens,
                "temperature": 0,
            }
        else:
            payload = {"inputs": prompt, "parameters": {"max_new_tokens": self.max_new_tokens, "do_sample": False}}
        if self.stream:
            payload["stream"] = True
        return json.dumps(payload).encode()

    def _arguments(self, prompt: str) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "EndpointName": self.endpoint.endpoint_name,
            "Body": self.body(prompt),
            "ContentType": "application/json",
        }
        if self.endpoint.target_variant:
            arguments["TargetVariant"] = self.endpoint.target_variant
        if self.endpoint.inference_component:
            arguments["InferenceComponentName"] = self.endpoint.inference_component
        return arguments

    @staticmethod
    def text_of(response: Any) -> str:
        if isinstance(response, list) and response:
            response = response[0]
        if isinstance(response, dict):
            if "generated_text" in response:
                return str(response["generated_text"])
            choices = response.get("choices") or []
            if choices:
                message = choices[0].get("message") or {}
                return str(message.get("content") or choices[0].get("text") or "")
        return ""

    def _streamed_text(self, arguments: dict[str, Any]) -> str:
        response = self.client.invoke_endpoint_with_response_stream(**arguments)
        buffer, parts = b"", []
        for event in response["Body"]:
            buffer += event.get("PayloadPart", {}).get("Bytes", b"")
            *lines, buffer = buffer.split(b"\n")
            parts += [_line_text(line) for line in lines]
        if buffer.strip():
            parts.append(_line_text(buffer))
        return "".join(parts)

    def predict(self, prompt: str) -> tuple[str | None, float | None]:
        arguments = self._arguments(prompt)
        for attempt in range(1, self.max_attempts + 1):
            try:
                if self.stream:
                    return self._streamed_text(arguments), None
                response = self.client.invoke_endpoint(**arguments)
                return self.text_of(json.loads(response["Body"].read())), None
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                if code not in RETRYABLE or attempt == self.max_attempts:
                    raise
                time.sleep(min(8.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random()))
        raise AssertionError("unreachable")


def _line_text(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    if text.startswith("data:"):
        text = text[5:].strip()
    if not text or text == "[DONE]":
        return ""
    try:
        obj = json.loads(text)
    except ValueError:
        return ""
    if "token" in obj:
        token = obj["token"] or {}
        return "" if token.get("special") else str(token.get("text", ""))
    for choice in obj.get("choices") or []:
        delta = choice.get("delta") or {}
        return str(delta.get("content") or choice.get("text") or "")
    return ""
