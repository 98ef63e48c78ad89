"""The ai_benchmark_jobs Lambda handler (staged at the root of its asset, beside the boto3 and botocore it bundles):
it runs, polls and stops SageMaker's managed benchmark jobs for the gate's cross-check, and imports the standard
library and boto3 only."""
