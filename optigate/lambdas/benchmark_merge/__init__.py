"""The benchmark_merge Lambda handler (staged at the root of its asset, beside optigate)."""
