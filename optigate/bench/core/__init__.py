"""The benchmark client's core, shipped whole in the benchmark Lambda (optigate.constructs.assets ships every module
of this folder): the streaming client, event-stream and payload parsing, load models, workloads and captures, metrics,
the runner and its shards.

Standard library only, and botocore (in the Lambda runtime) where AWS is read; it imports nothing of optigate outside
this folder, so the Lambda needs no compiled dependency and no other layer (tests/architecture/test_bench_core.py).
"""
