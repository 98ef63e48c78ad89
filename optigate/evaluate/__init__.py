"""Quality evaluation, baseline vs candidate. `scoring`, `compare` and `spotcheck` are pure
(no fmeval); `runner`, `transforms` and `job` need fmeval, which lives in its own environment
(fmeval 1.2.3 pins sagemaker<3, whose image tables predate LMI v15)."""
