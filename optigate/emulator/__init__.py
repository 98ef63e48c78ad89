"""The SageMaker-runtime emulator: an offline stand-in for SageMaker runtime and the serving containers behind it
(`optigate emulate`), so a benchmark, a rehearsal or a test has an endpoint to stream from on loopback, without AWS.

Each surface it serves (an API, a route, a stream's form) is one optigate.serving.surfaces sources for the container
or service it stands for, and it serves none without a row there. sagemaker_runtime is the HTTP server (the
runtime's invocation APIs, and the container's `GET /metrics` where it publishes one); config what it is told to
do; server, scheduler and latency_model one emulated server's batch, prefix cache and costs; lmi_streams what LMI
streams; container_metrics its metrics page; emulated_surfaces which surfaces a container publishes; answers the
answer tables of a quality evaluation; truth what the latency model says a load gets; process runs it in a process
of its own.

Who may import it: the tests, the benchmarks under benchmarks/, the rehearsal (optigate.rehearse) and the CLI
(`optigate emulate`). Never the benchmark client (optigate.bench), whose core ships in the benchmark Lambda: the
emulator stands in for what the client measures, it is not part of it (tests/architecture/test_layers.py).
"""
