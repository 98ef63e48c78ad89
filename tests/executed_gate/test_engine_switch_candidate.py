"""A gate candidate that changes a vLLM engine switch is a different proof: its environment carries the switch and
the gate's fingerprint changes with it (issue 17 part 2)."""

from __future__ import annotations

import dataclasses
import textwrap

from optigate.deployment import load_resolved_team

TEAM = textwrap.dedent(
    """\
    team: chat
    model:
      source:
        s3_uri: s3://acme-models/llama-3.1-8b/
      architecture: llama-3.1-8b
    serving:
      instance_type: ml.g6.2xlarge
      max_model_len: 8192
    gate:
      candidate:
        {candidate}
      evaluation:
        dataset_s3_uri: s3://acme-eval/chat.jsonl
    """
)


def _candidate_environment(tmp_path, candidate: str) -> dict[str, str]:
    path = tmp_path / f"{abs(hash(candidate))}.yaml"
    path.write_text(TEAM.format(candidate=candidate))
    return load_resolved_team(path).candidate.environment


def test_a_switch_in_the_candidate_changes_the_gates_fingerprint(tmp_path, gate_spec):
    graphs = _candidate_environment(tmp_path, "max_batch_size: 16")
    eager = _candidate_environment(tmp_path, "{max_batch_size: 16, enforce_eager: true}")
    assert {k: v for k, v in eager.items() if k != "OPTION_ENFORCE_EAGER"} == graphs
    assert eager["OPTION_ENFORCE_EAGER"] == "true"
    base = gate_spec(False)
    with_graphs = dataclasses.replace(base, candidate_environment=graphs, change={"max_batch_size": 16})
    with_eager = dataclasses.replace(
        base, candidate_environment=eager, change={"max_batch_size": 16, "enforce_eager": True}
    )
    assert with_eager.container_environment["OPTION_ENFORCE_EAGER"] == "true"
    assert with_eager.fingerprint != with_graphs.fingerprint
    # the environment alone (same change as written) already makes it another proof
    assert dataclasses.replace(with_eager, change=with_graphs.change).fingerprint != with_graphs.fingerprint
