"""The gate report's format version, in a module of its own: the writer (GateVerdict.to_dict, in the decision
Lambda) and the reader's model (optigate.gate.report_file) share it."""

FORMAT_VERSION = 1
