#!/usr/bin/env bash
# Run the tests, or the Glue job, inside the official AWS Glue 5 image — for those with Docker
# (CI here has none; the same code runs there with local Spark).
#
#   local/glue_container.sh test [pytest args]        # tests/aws in the image (moto, osmem, local Spark)
#   local/glue_container.sh job --icecdc_config s3://… --icecdc_table db.t --icecdc_state_table … \
#                               --icecdc_region … --icecdc_dead_letter s3://…
#                                                     # the job against real AWS: pass credentials with
#                                                     # AWS_PROFILE (~/.aws is mounted read-only)
#
# The image brings Glue 5's Spark, Python 3.11 and awsglue; icecdc and its test dependencies are
# pip-installed into the container's user site on each run (nothing is kept).
set -euo pipefail
IMAGE="${GLUE_IMAGE:-public.ecr.aws/glue/aws-glue-libs:5}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
mode="${1:-test}"; shift || true

case "$mode" in
  test) inner="python3 -m pip install --user -q 'pip>=25.1' && python3 -m pip install --user -q -e '.[local,aws,cdk]' --group test --group cdk-test && python3 -m pytest tests/aws -q $*" ;;
  job)  inner="pip install --user -q -e '.[aws]' && spark-submit glue_jobs/icecdc_job.py --JOB_NAME local $*" ;;
  *) echo "usage: $0 test [pytest args] | job <job arguments>" >&2; exit 2 ;;
esac

exec docker run --rm -it \
  -v "$ROOT":/home/hadoop/workspace -w /home/hadoop/workspace \
  -v "$HOME/.aws":/home/hadoop/.aws:ro -e AWS_PROFILE -e AWS_REGION \
  --entrypoint bash "$IMAGE" -c "$inner"
