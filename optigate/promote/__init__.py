"""Promotion: what each environment serves (lock files resolved from the Model Registry before synth)."""
