"""A candidate with instance pools is recorded for every pool it may be promoted to, and a change of pools is a
different proof (issue 16 part 2): the gate measures the priority-1 type, the planner checked every pool."""

from __future__ import annotations

import dataclasses


def test_a_pooled_candidate_is_recorded_for_every_pool_and_pools_are_part_of_the_proof(gate_spec):
    single = gate_spec(False)
    pooled = dataclasses.replace(single, instance_pools=(single.instance_type, "ml.g6e.2xlarge"))
    other = dataclasses.replace(single, instance_pools=(single.instance_type, "ml.g6e.4xlarge"))
    assert single.supported_instance_types == [single.instance_type]
    assert pooled.supported_instance_types == [single.instance_type, "ml.g6e.2xlarge"]
    assert len({single.fingerprint, pooled.fingerprint, other.fingerprint}) == 3
    # Without pools the fingerprint is what it was before pools existed (no proof is invalidated by the field).
    assert dataclasses.replace(single, instance_pools=()).fingerprint == single.fingerprint


def test_the_model_package_names_every_pool(gate_spec, gate_synth, tmp_path):
    from optigate.rehearse.asl import sdk_calls
    from optigate.rehearse.template import placeholder_definition, state_machines

    spec = gate_spec(False)
    template = gate_synth(False, tmp_path, instance_pools=(spec.instance_type, "ml.g6e.2xlarge"))
    packages = [
        call
        for logical in state_machines(template)
        for call in sdk_calls(placeholder_definition(template, logical))
        if call.operation == "CreateModelPackage"
    ]
    assert packages
    for call in packages:
        types = call.parameters["InferenceSpecification"]["SupportedRealtimeInferenceInstanceTypes"]
        assert types == [spec.instance_type, "ml.g6e.2xlarge"], call.state
