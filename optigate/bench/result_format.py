"""The bench result file's format version, in a module of its own: the writer (`runner`, also bundled into the
benchmark Lambda, which has no pydantic) and the reader's model (`result_file`) share it."""

FORMAT_VERSION = 1
