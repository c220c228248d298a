"""What the AWS entries share: the planner Lambda (lambdas/planner) and the Glue job (glue_jobs/).

`contract` names what infra/ sets and the entries read; `deployed` turns it into a `Config`;
`events` reads what EventBridge and SQS deliver; `planner` decides and starts work per table;
`job` runs the scheduled audit; `metrics` publishes to CloudWatch. No module imports Spark:
the Lambda package has none.
"""
