"""Quality evaluation, baseline vs candidate. `scoring`, `quality_verdict` and `spotcheck` are pure
(no fmeval); `model_runner`, `transforms` and `job` need fmeval, which lives in its own environment
(fmeval 1.2.3 pins sagemaker<3, whose image tables predate LMI v15)."""
