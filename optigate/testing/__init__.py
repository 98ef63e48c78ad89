"""Test support shipped with the package: the moto harness that executes optigate's state machines
offline (tests and `optigate rehearse`). It needs the dev extra (moto)."""
