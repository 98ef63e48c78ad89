"""The gate_decide Lambda handler (staged at the root of its asset, beside optigate)."""
