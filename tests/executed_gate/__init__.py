"""The gate executed: each test runs a gate's state machine whole in moto's Step Functions executor, against emulated
endpoints (optigate.emulator) and the emulated SageMaker of optigate.rehearse, and reads the verdict it reaches. About
half a minute each. The verdict logic on its own, with no state machine run, is tested in tests/gate."""
