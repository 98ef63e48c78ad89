"""`optigate rehearse`: optigate's state machines executed offline on moto, with SageMaker emulated (the
command, and the gate tests). The modules that drive moto (``harness``, ``patches``, ``sync_service``,
``sagemaker``, ``gate_handlers``, ``gate_run``, ``rehearsal``) need the rehearse extra
(`pip install 'optigate[rehearse]'`); nothing is imported here, so the template readers (``asl``,
``template``, ``validation``, ``gate_layout``) work without it.

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
- ``gate_handlers``: the gate's Lambda handlers in-process (``lambda_handlers``), ``evaluation_writer``
- ``gate_run``: ``GateRun``, a stack's gate created and executed in a harness; ``compress``
- ``rehearsal``: ``optigate rehearse``: a team's gate, offline, with emulated endpoints
"""
