"""Rules that synthesized CloudFormation templates must follow, checked offline: a rule pack used by the tests
(cdk-nag's layout).

- ``rules/``: one rule per module (an ``ID``, what it requires, ``check(stack)``)
- ``registry``: the rules by ID, and ``findings(stack, *ids)``
- ``test_rules.py``: each rule on a compliant and a non-compliant template fragment
- ``assembly``: a cloud assembly's stacks and the physical names their tokens stand for
- ``iam/``: the IAM action database, policies and grants, Task parameters evaluated, what a call needs,
  what a Lambda handler calls
- ``dataflow/``: JSONPaths and the types of values in a state's input (the optional-reads rule's walk)

Tokens are rendered by optigate.rehearse.template, the rehearsal's renderer.
"""
