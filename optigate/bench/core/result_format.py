"""The bench result file's format version, in a module of its own: the writers (`runner` and the merge Lambda,
bundled into the benchmark Lambdas, which have no pydantic) and the reader's models (`result_file`) share it.

A merged fleet result (the merge Lambda's file) is a bench result with the shards it came from: one layout, one
version."""

FORMAT_VERSION = 1

#: The longest span of one run's times (sends, arrivals, completions), seconds. A benchmark level runs minutes;
#: throughput counts one-second buckets across the span, so a time far off (a hand-edit, a corrupted value)
#: would ask for billions of buckets. The reader refuses a run beyond it; the merge, a shard beyond it.
MAX_RUN_SPAN_S = 6 * 3600.0
