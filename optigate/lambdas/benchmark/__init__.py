"""The benchmark Lambda handler (staged at the root of its asset, beside optigate)."""
