"""`gate.candidate.speculative_decoding: {method: eagle, train_from: ...}`: an EAGLE head the gate's optimization job
trains. Where it may be configured, which containers serve it, and, for `train_from: data_capture`, every
environment's capture the job cannot read, refused at the capture setting to change with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from optigate.config.loader import ConfigError, load_project, load_team
from optigate.config.models import DataCapture, EagleTraining, Environment, EnvironmentOverrides
from optigate.config.rules.cross_file import effective_overrides
from optigate.deployment import load_resolved_project
from optigate.deployment.team import optimization_configs, refused_combination
from tests.conftest import CONFIG, edited_config
from tests.fixtures.config_files import minimal_team

CHAT_PROD_CAPTURE = """        data_capture:
          percentage: 5
          encryption: s3_managed
          json_content_types: [application/json]
          request_format: openai_chat
"""
EAGLE_CANDIDATE = """
gate:
  candidate:
    speculative_decoding: {method: eagle, train_from: "s3://acme-traffic/demo/", num_speculative_tokens: 3}
  evaluation:
    dataset_s3_uri: s3://acme-eval/demo/
"""


def _messages(config: Path) -> list[str]:
    with pytest.raises(ConfigError) as error:
        load_project(config)
    return [str(issue) for issue in error.value.issues]


def _team_messages(path: Path) -> list[str]:
    from optigate.deployment import load_resolved_team

    with pytest.raises(ConfigError) as error:
        load_resolved_team(path)
    return [str(issue) for issue in error.value.issues]


# --------------------------------------------------------------------------- the example


def test_the_example_chat_team_trains_its_head_from_each_environments_capture():
    project = load_resolved_project(CONFIG)
    chat = project.teams["chat"]
    assert chat.trained_head == EagleTraining(method="eagle", train_from="data_capture", num_speculative_tokens=3)
    assert chat.optimization_configs == [{"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}]
    for environment in project.environments:
        capture = effective_overrides(chat.team, environment).capture
        assert capture is not None and capture.encryption == "s3_managed", environment.name
        assert "application/json" in capture.json_content_types and capture.request_format == "openai_chat"
    # The other teams keep prod's KMS capture of data_capture_percentage: 5.
    prod = project.environments[-1]
    assert effective_overrides(project.teams["research"].team, prod).capture == DataCapture(percentage=5)


def test_the_records_the_capture_must_hold_reach_the_gates_check(tmp_path):
    """Before the job, the gate counts min_training_records readable chat records in the capture: 7,473 unless the
    team says (GSM8K's training split, the smallest set SageMaker trains EAGLE heads on), at least 1."""
    from optigate.deployment import deploy

    project = load_resolved_project(CONFIG)
    head = deploy(project.teams["chat"], project.environments[0]).gate.trained_head
    assert head.min_training_records == 7_473
    assert head.training_check("s3://capture/chat-dev") == {"source": "s3://capture/chat-dev", "min_records": 7_473}
    assert "min_training_records" not in head.proof  # it decides whether a run starts, not what is proven

    lowered = edited_config(
        tmp_path / "low", "teams/chat.yaml", "num_speculative_tokens: 3", "min_training_records: 500"
    )
    project = load_resolved_project(lowered)
    assert deploy(project.teams["chat"], project.environments[0]).gate.trained_head.min_training_records == 500
    # From an S3 prefix nothing is counted (it is not capture).
    assert head.__class__(train_from="s3://acme-traffic/chat/").training_check() is None

    zero = edited_config(tmp_path / "zero", "teams/chat.yaml", "num_speculative_tokens: 3", "min_training_records: 0")
    (message,) = _messages(zero)
    assert message.endswith(
        "chat.yaml:34 gate.candidate.speculative_decoding.eagle.min_training_records: Input should be greater than "
        "or equal to 1"
    )


def test_the_example_captures_as_optigate_did_before_are_refused_with_what_to_change(tmp_path):
    """Without chat's own capture, prod's environment-wide `data_capture_percentage: 5` applies: a KMS-encrypted
    capture with base64 payloads of requests in a format nobody stated, none of which the job can train from."""
    config = edited_config(tmp_path, "environments.yaml", CHAT_PROD_CAPTURE, "")
    messages = _messages(config)
    assert len(messages) == 3, messages
    assert all(
        "environments[2].overrides.data_capture_percentage: team 'chat' trains its EAGLE head" in m for m in messages
    )
    kms, base64, request_format = messages
    assert "is KMS-encrypted" in kms and "'unencrypted captured data'" in kms and "encryption: s3_managed" in kms
    assert "base64" in base64 and "json_content_types: [application/json]" in base64
    assert "request_format: openai_chat" in request_format and "cannot see the clients" in request_format


def test_an_environment_that_captures_nothing_is_refused(tmp_path):
    dev = """    teams:
      # chat's gate trains an EAGLE head from the capture of the environment it runs in: the job reads only
      # unencrypted (SSE-S3, no capture KMS key) JSON captures of OpenAI/ShareGPT requests.
      chat:
        data_capture:
          percentage: 100
          encryption: s3_managed
          json_content_types: [application/json]
          request_format: openai_chat
"""
    (message,) = _messages(edited_config(tmp_path, "environments.yaml", dev, ""))
    assert (
        "environments[0].overrides.data_capture: team 'chat' trains its EAGLE head from data capture: "
        "captures nothing in dev" in message
    )
    assert "train_from an S3 prefix" in message


@pytest.mark.parametrize(
    ("old", "new", "where", "reason"),
    [
        ("encryption: s3_managed", "encryption: kms", "encryption", "is KMS-encrypted"),
        ("json_content_types: [application/json]", "json_content_types: []", "json_content_types", "base64"),
        ("request_format: openai_chat", "request_format: lmi", "request_format", "{inputs, parameters}"),
        ("percentage: 100", "percentage: 0", "percentage", "captures nothing in dev"),
    ],
)
def test_each_unusable_capture_setting_is_refused_at_its_key(tmp_path, old, new, where, reason):
    (message,) = _messages(edited_config(tmp_path, "environments.yaml", old, new))
    assert f"environments[0].teams.chat.data_capture.{where}: team 'chat' trains its EAGLE head" in message
    assert reason in message


def test_openai_completions_and_sharegpt_captures_are_trainable(tmp_path):
    for fmt in ("openai_completions", "sharegpt"):
        config = edited_config(
            tmp_path / fmt, "environments.yaml", "request_format: openai_chat", f"request_format: {fmt}"
        )
        load_project(config)


def test_an_s3_prefix_needs_no_capture(tmp_path):
    config = edited_config(tmp_path, "environments.yaml", CHAT_PROD_CAPTURE, "")
    edited_config(tmp_path, "teams/chat.yaml", "train_from: data_capture", "train_from: s3://acme-traffic/chat/")
    project = load_resolved_project(config)
    assert project.teams["chat"].trained_head.s3_data_type == "S3Prefix"


def test_both_capture_keys_in_one_block_are_refused(tmp_path):
    config = edited_config(
        tmp_path,
        "environments.yaml",
        "      data_capture_percentage: 5\n",
        "      data_capture_percentage: 5\n      data_capture: {percentage: 5}\n",
    )
    messages = _messages(config)
    assert any(
        "environments[2].overrides.data_capture_percentage: give data_capture or data_capture_percentage, not both" in m
        for m in messages
    ), messages


def test_a_teams_own_capture_replaces_the_environments_whichever_key_either_uses():
    environment = Environment(
        name="prod",
        account="333333333333",
        region="us-west-2",
        overrides=EnvironmentOverrides(data_capture=DataCapture(percentage=5, encryption="s3_managed")),
        teams={"chat": EnvironmentOverrides(data_capture_percentage=20)},
    )
    team = load_resolved_project(CONFIG).teams["chat"].team
    assert effective_overrides(team, environment).capture == DataCapture(percentage=20)
    environment = environment.model_copy(update={"teams": {"chat": EnvironmentOverrides(data_capture_percentage=0)}})
    assert effective_overrides(team, environment).capture is None


# --------------------------------------------------------------------------- where eagle may be configured


def test_eagle_in_the_serving_block_is_refused_with_the_alternatives(tmp_path):
    path = minimal_team(
        tmp_path,
        "llama-3.1-8b",
        "ml.g6.2xlarge",
        'speculative_decoding: {method: eagle, train_from: "s3://acme-traffic/demo/"}\n',
    )
    with pytest.raises(ConfigError) as error:
        load_team(path)
    (issue,) = error.value.issues
    assert issue.path == "serving.speculative_decoding.method"
    assert "gate.candidate setting only" in issue.message and "method: eagle3 with a model_s3_uri" in issue.message


def test_eagle_as_a_shadow_candidate_is_refused(tmp_path):
    path = minimal_team(
        tmp_path,
        "llama-3.1-8b",
        "ml.g6.2xlarge",
        tail="""
        rollout:
          strategy: shadow
          shadow:
            sampling_percentage: 10
            candidate:
              speculative_decoding: {method: eagle, train_from: "s3://acme-traffic/demo/"}
        """,
    )
    messages = _team_messages(path)
    assert any("rollout.shadow.candidate.speculative_decoding.method: eagle trains a head" in m for m in messages)


@pytest.mark.parametrize(
    ("container", "reason"),
    [
        ("container: {family: lmi-trtllm}", "only container family lmi reads (not lmi-trtllm)"),
        ("container: {family: lmi, version: 0.31.0}", "needs LMI v15 (container version 0.33.0) or newer"),
    ],
)
def test_a_container_that_cannot_serve_a_trained_head_is_refused(tmp_path, container, reason):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", container + "\n", tail=EAGLE_CANDIDATE)
    messages = _team_messages(path)
    assert any(reason in m for m in messages), messages


def test_an_eagle_job_on_an_instance_the_job_cannot_use_is_refused_at_speculative_decoding(tmp_path):
    """CreateOptimizationJob's DeploymentInstanceType is narrower than the endpoints' (botocore): ml.p5.4xlarge
    is an endpoint type (not in optigate's catalog yet), so the rule is called with it directly."""
    from optigate.config.models import Serving
    from optigate.deployment.team import optimization_job_problems

    team = load_team(minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", tail=EAGLE_CANDIDATE), rules=False)
    (problem,) = optimization_job_problems(team, Serving(instance_type="ml.p5.4xlarge"))
    assert problem.path == ("gate", "candidate", "speculative_decoding")
    assert "the SageMaker optimization job that trains the candidate's EAGLE head cannot run on ml.p5.4xlarge" in (
        problem.message
    )
    assert optimization_job_problems(team, Serving(instance_type="ml.g6.2xlarge")) == []


def test_a_manifest_is_read_as_a_manifest_file():
    assert EagleTraining(method="eagle", train_from="s3://acme-b/data/train.manifest").s3_data_type == "ManifestFile"
    assert EagleTraining(method="eagle", train_from="s3://acme-b/data/manifest.json").s3_data_type == "ManifestFile"
    assert EagleTraining(method="eagle", train_from="s3://acme-b/data/").s3_data_type == "S3Prefix"
    explicit = EagleTraining(method="eagle", train_from="s3://acme-b/list.json", data_type="ManifestFile")
    assert explicit.s3_data_type == "ManifestFile"


# --------------------------------------------------------------------------- the one job


def test_quantization_and_eagle_share_one_job_quantization_first(tmp_path):
    path = minimal_team(
        tmp_path,
        "llama-3.1-8b",
        "ml.g6.2xlarge",
        tail=EAGLE_CANDIDATE.replace("  candidate:\n", "  candidate:\n    quantization: fp8\n"),
    )
    team = load_team(path)
    assert optimization_configs(team) == [
        {"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "fp8"}}},
        {"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}},
    ]


@pytest.mark.parametrize("other", ["ModelCompilationConfig", "ModelShardingConfig"])
def test_compilation_or_sharding_with_eagle_is_refused(other):
    eagle = {"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}
    refusal = refused_combination([{other: {}}, eagle])
    assert refusal is not None and other in refusal and "ModelBuilder.optimize" in refusal
    assert refused_combination([{other: {}}]) is None
    assert refused_combination([{"ModelQuantizationConfig": {}}, eagle]) is None
