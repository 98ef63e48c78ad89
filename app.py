#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c env=dev` synthesizes every team's stack for dev."""

from optigate.stacks.app import main

main()
