"""What the tests share: tables, the pipeline under test, Spark SQL on its catalog, the fault
proxy in front of OpenSearch, the AWS fakes. No test module imports another; they import these."""
