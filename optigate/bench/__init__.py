"""Streaming benchmark: the client's core (core/, shipped in the benchmark Lambda), and around it capacity and
residency searches, compare, goodput, result files, server metrics, report and plots (pure logic apart from I/O)."""
