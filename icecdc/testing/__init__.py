"""Helpers for tests and the demo: commits of the kinds icecdc must follow.

Never shipped to AWS (infra/bundling.py leaves this package out of the Lambda and Glue bundles)."""
