"""Streaming benchmark: client, load models, metrics, emulator, report (pure logic apart from I/O)."""
