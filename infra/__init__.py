"""The CDK app's stack and its synth-time bundling (see app.py)."""
