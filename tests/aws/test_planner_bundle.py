"""The planner as deployed: its handler run by a bare interpreter (no site-packages) on the layer
that `python app.py` built with manylinux wheels — no pyarrow, manifests read through fsspec/s3fs.
The layer is built here when no synth has built it yet (pip needs PyPI once; see infra/bundling.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from infra.bundling import LAMBDA_CATALOG_PROPERTIES, lambda_layer
from tests.support.planner import ROOT, Deployment, table_event


def test_the_bundled_planner_plans_without_pyarrow(deployment: Deployment) -> None:
    layer = lambda_layer(ROOT / ".build")  # what `python app.py` builds and deploys
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "lambdas" / "planner"), str(ROOT), str(layer / "python")]),
        "ICECDC_CATALOG_PROPERTIES": json.dumps(LAMBDA_CATALOG_PROPERTIES),
    }
    script = (
        "import json, sys, handler\n"
        "assert 'pyarrow' not in sys.modules\n"
        "result = handler.handler(json.loads(sys.argv[1]))\n"
        "assert 'pyarrow' not in sys.modules, 'the planner imported pyarrow'\n"
        "print(json.dumps(result))\n"
    )
    # -S: no site-packages, so only the layer's packages (and this repo's code) can be imported
    done = subprocess.run(
        [sys.executable, "-S", "-c", script, json.dumps(table_event(deployment.db, "orders"))],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    [outcome] = json.loads(done.stdout.strip().splitlines()[-1])["tables"]
    assert outcome["has_work"] and outcome["job_run_id"] and outcome["error"] is None
