"""The stage_candidate Lambda handler (staged at the root of its asset, beside its two standard-library helpers):
it stages a candidate's extra files and trained head, checks new adapter archives and reads an adapter mix, and
imports the standard library, boto3 and botocore only."""
