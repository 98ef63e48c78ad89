"""The rules, one per module: each has an `ID`, a docstring whose first line says what it requires, and
`check(stack)` returning its findings (empty: compliant). tests.template_rules.registry lists them."""
