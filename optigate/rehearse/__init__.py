"""Test support shipped with the package: offline execution of optigate's state machines on moto (the
tests and `optigate rehearse`). Everything but `asl`, `template` and `gate_layout` needs the dev extra
(moto), so nothing is imported here.

- ``asl``: the states and AWS API calls of a Step Functions definition
- ``template``: a synthesized template's state machines, tokens rendered
- ``validation``: requests and definitions checked against botocore's service models
- ``scenario``: ``Outcome``, ``Scenario``: what the emulated SageMaker does
- ``sagemaker``: the emulated SageMaker operations (endpoints, jobs, inference components)
- ``sync_service``: Step Functions' optimized ``sagemaker`` integration (``.sync``)
- ``lambda_runtime``: Lambda functions run in-process
- ``cloudwatch``: variant metrics and percentiles
- ``patches``: what the harness changes in moto while active, and ``active_harness()``
- ``harness``: ``GateHarness``
- ``gate_layout``: the gate, its fleet and their functions in a template, found by structure
- ``gate_run``: ``GateRun``, a stack's gate created and executed in a harness; ``compress``
- ``rehearse``: ``optigate rehearse``: a team's gate, offline, with emulated endpoints
"""
