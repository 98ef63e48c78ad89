"""What the IAM rules share: the IAM action database, policies and grants, Task parameters evaluated offline,
the permissions a call needs, and the calls a Lambda handler makes."""
