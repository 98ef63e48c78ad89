"""The gate's parts called directly, no state machine run: the verdict logic and report (optigate.gate), and the
handlers and Lambdas its steps call. A whole gate executed in moto's Step Functions executor is tested in
tests/executed_gate."""
