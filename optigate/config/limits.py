"""Sane upper bounds for what reaches the planner and synth: far above any real model or endpoint, low enough
that no arithmetic on them overflows or runs for long. Their own module so the models and the LMI option table
(optigate.config.lmi_options, which the models import) share them.
"""

MAX_TOKENS = 1 << 25  # 33,554,432: above every published context window
MAX_WIDTH = 1 << 22  # hidden, intermediate and expert sizes
MAX_HEADS = 4096
MAX_CAPACITY = 1000  # instances or copies behind one endpoint
MAX_BUDGET_MS = 3_600_000.0  # an hour
MAX_GAIN_PCT = 1000.0
#: The largest non-inferiority margin a team may set (a negative min_throughput_gain_pct): a candidate half as fast
#: is never "not worse".
MAX_NON_INFERIORITY_PCT = 50.0
#: A candidate that only brings new adapter versions is not expected to be faster, only not slower: its throughput
#: may be this much below the twin's (the interval's lower end) unless the team sets min_throughput_gain_pct.
ADAPTER_VERSION_MARGIN_PCT = -5.0
