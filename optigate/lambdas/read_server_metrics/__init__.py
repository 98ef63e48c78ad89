"""The read_server_metrics Lambda handler (staged at the root of its asset, beside server_metrics.py)."""
