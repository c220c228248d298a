"""Tests of the pure modules, one file per module (`test_<module>.py`): tables of cases, no Spark,
OpenSearch or AWS, each in milliseconds. They run in `make test-fast`."""
