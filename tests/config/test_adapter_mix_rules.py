"""gate.benchmark.adapter_mix's rules: names (with a did-you-mean), weights, and adapters to spread over."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from optigate.config.models import TeamConfig
from optigate.config.rules.adapter_mix_rules import adapter_mix_problems

TEAM = {
    "team": "support",
    "model": {"source": {"s3_uri": "s3://acme-models/llama-3.1-8b/"}, "architecture": "llama-3.1-8b"},
    "serving": {"instance_type": "ml.g6.2xlarge", "max_model_len": 8192},
    "adapters": [
        {"name": "reply", "s3_uri": "s3://acme-models/adapters/reply.tar.gz"},
        {"name": "summarize", "s3_uri": "s3://acme-models/adapters/summarize.tar.gz"},
    ],
}


def problems(mix, **team):
    config = TeamConfig.model_validate({**TEAM, **team, "gate": {"benchmark": {"adapter_mix": mix}}})
    return [(p.path, p.rule_id, p.message) for p in adapter_mix_problems(config)]


def test_a_misspelt_adapter_is_refused_with_the_closest_name():
    [(path, rule, message)] = problems({"base": 1, "summarise": 2})
    assert path == ("gate", "benchmark", "adapter_mix", "summarise") and rule == "OG430"
    assert "did you mean 'summarize'" in message


def test_an_unknown_name_lists_the_names_there_are():
    [(_, _, message)] = problems({"triage": 1})
    assert "expected one of base, reply, summarize" in message


def test_weights_must_be_above_zero():
    found = problems({"base": 0, "reply": 1, "summarize": -1})
    assert [(path[-1], rule) for path, rule, _ in found] == [("base", "OG431"), ("summarize", "OG431")]


def test_an_infinite_weight_is_refused_by_the_config_model_itself():
    with pytest.raises(ValidationError, match="finite number"):
        problems({"base": 1, "reply": math.inf})


def test_a_team_without_adapters_has_no_mix():
    [(path, rule, _)] = problems({"base": 1}, adapters=[])
    assert path == ("gate", "benchmark", "adapter_mix") and rule == "OG432"


def test_a_good_mix_passes():
    assert problems({"base": 1, "reply": 2.5}) == []
