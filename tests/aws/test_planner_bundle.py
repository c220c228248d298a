"""The planner as deployed: its bundled code (handler, icecdc, the configuration as `icecdc.yaml`)
run by a bare interpreter of the runtime's Python version (CPython 3.13, as Lambda's python3.13;
`-S`: no site-packages) on the trimmed layer that `python app.py` builds from
infra/locks/lambda.txt, files read through fsspec/s3fs, against moto (Glue Data Catalog, S3,
DynamoDB, Glue jobs) and osmem. The layer is built here when no synth has built it yet (pip needs
PyPI once; see infra/bundling.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from icecdc.verify import diff_index
from infra.bundling import (
    LAMBDA_CATALOG_PROPERTIES,
    LAMBDA_PYTHON,
    LAMBDA_TRIM,
    LAMBDA_UNZIPPED_LIMIT,
    lambda_code,
    lambda_layer,
    runtime_interpreter,
    tree_size,
    trimmed_record,
)
from tests.support.aws import Lake, rows
from tests.support.planner import ROOT, Deployment, table_event


def runtime_python() -> str:
    """The interpreter of the planner runtime's Python version that synth compiles the bundles with."""
    found = runtime_interpreter(LAMBDA_PYTHON)
    if found is None:
        pytest.fail(
            f"no python{LAMBDA_PYTHON} to run the planner's layer as Lambda does: install it (pyenv install {LAMBDA_PYTHON})"
        )
    return found


@pytest.fixture(scope="module")
def layer() -> Path:
    return lambda_layer(ROOT / ".build")  # what `python app.py` builds and deploys


def run_bundled(layer: Path, code: Path, argument: Any, script: str) -> dict[str, Any]:
    """`script` run in the bundled code's directory (Lambda's /var/task) on the layer (its /opt/python)."""
    env = {
        **os.environ,  # the Deployment's ICECDC_* variables and moto's endpoint
        "PYTHONPATH": os.pathsep.join([str(code), str(layer / "python")]),
        "ICECDC_CONFIG": "icecdc.yaml",  # as the stack sets it: the file bundled with the code
        "ICECDC_CATALOG_PROPERTIES": json.dumps(LAMBDA_CATALOG_PROPERTIES),
    }
    # -S: no site-packages, so only the layer's packages (and the bundled code) can be imported
    done = subprocess.run(
        [runtime_python(), "-S", "-c", script, json.dumps(argument)],
        cwd=code, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bundled_code(tmp_path: Path) -> Path:
    return lambda_code(ROOT, tmp_path / "code", Path(os.environ["ICECDC_CONFIG"]))


def test_the_bundled_planner_applies_a_small_batch_itself(
    layer: Path, lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, osmem_server: Any, tmp_path: Path
) -> None:
    url = str(osmem_server.clone().url)
    orders = lake.create_table(f"{lake.database}.orders")
    orders.append(rows(1, 2, 3))
    orders.append(rows(4, region="eu"))
    lake.create_table(f"{lake.database}.customers").append(rows(7))
    deployment = Deployment(lake, state_table, [f"{lake.database}.orders", f"{lake.database}.customers"], monkeypatch, url)
    script = (
        "import json, sys, handler\n"
        "result = handler.handler(json.loads(sys.argv[1]))\n"
        "assert 'pyarrow' in sys.modules and 'opensearchpy' in sys.modules\n"
        "import pyarrow\n"
        "result['pyarrow'] = pyarrow.__file__\n"
        "result['python'] = '%d.%d' % sys.version_info[:2]\n"
        "print(json.dumps(result))\n"
    )
    code = bundled_code(tmp_path)
    first = run_bundled(layer, code, table_event(deployment.db, "orders"), script)  # the export
    table = lake.catalog().load_table(deployment.orders)
    table.delete("id == 2")  # copy-on-write: the file rewritten without the row
    table.append(rows(5, region="eu"))
    second = run_bundled(layer, code, table_event(deployment.db, "orders"), script)  # two commits' changes

    for result in (first, second):
        [outcome] = result["tables"]
        assert (outcome["has_work"], outcome["error"], outcome["job_run_id"]) == (True, None, None)
        assert result["pyarrow"].startswith(str(layer))  # the layer's, not the virtualenv's
        assert result["python"] == LAMBDA_PYTHON  # the runtime's Python (python3.13)
    assert second["tables"][0]["applied_snapshots"] == 2
    assert second["tables"][0]["checkpoint"] == lake.catalog().load_table(deployment.orders).current_snapshot().snapshot_id
    assert deployment.runs(deployment.orders) == []  # no Glue job run started
    diff = diff_index(lake.catalog().load_table(deployment.orders), ("id",), OpenSearch(hosts=[url]), "orders")
    assert not diff, diff.summary()


def test_the_bundled_planner_starts_the_job_when_it_does_not_apply(layer: Path, deployment: Deployment, tmp_path: Path) -> None:
    # the fixture's configuration has aws.planner_applies: false
    script = (
        "import json, sys, handler\n"
        "assert 'pyarrow' not in sys.modules\n"
        "result = handler.handler(json.loads(sys.argv[1]))\n"
        "assert 'pyarrow' not in sys.modules, 'the planner imported pyarrow without applying'\n"
        "print(json.dumps(result))\n"
    )
    result = run_bundled(layer, bundled_code(tmp_path), table_event(deployment.db, "orders"), script)
    [outcome] = result["tables"]
    assert outcome["has_work"] and outcome["job_run_id"] and outcome["error"] is None
    assert outcome["applied_snapshots"] == 0
    [run] = deployment.runs(deployment.orders)
    assert run["Id"] == outcome["job_run_id"]


def test_the_layer_and_the_code_fit_lambda_and_every_trim_rule_removes_something(layer: Path, tmp_path: Path) -> None:
    config = tmp_path / "icecdc.yaml"
    config.write_text((ROOT / "infra" / "example-config.yaml").read_text())
    code = lambda_code(ROOT, tmp_path / "code", config)
    unzipped = tree_size(layer) + tree_size(code)
    assert unzipped < LAMBDA_UNZIPPED_LIMIT, f"{unzipped:,} bytes unzipped: over Lambda's limit"
    record = json.loads(trimmed_record(layer).read_text())
    assert record["remaining"] == tree_size(layer / "python")
    idle = [rule.pattern for rule in LAMBDA_TRIM if not record["removed"].get(rule.pattern)]
    assert not idle, f"trim rules that no longer match anything (re-measure, update infra/bundling.py): {idle}"


# What a pass may load beyond the modules of icecdc: merge-on-read (position deletes, deletion
# vectors in Puffin, zstd-compressed), SigV4 to a domain, the trimmed packages' own entry points.
LAZY_IMPORTS = (
    "pyarrow.parquet", "pyarrow.dataset", "pyarrow.compute", "pyarrow.fs", "pyiceberg.io.pyarrow", "pyiceberg.io.fsspec",
    "pyiceberg.table.puffin", "pyiceberg.catalog.glue", "pyroaring", "s3fs", "opensearchpy.helpers",
)  # fmt: skip


def test_the_trimmed_layer_imports_every_module_a_pass_may_load_from_bytecode(layer: Path, tmp_path: Path) -> None:
    config = tmp_path / "icecdc.yaml"
    config.write_text((ROOT / "infra" / "example-config.yaml").read_text())
    code = lambda_code(ROOT, tmp_path / "code", config)
    modules = sorted(
        ".".join(path.relative_to(code).with_suffix("").parts).removesuffix(".__init__")
        for path in (code / "icecdc").rglob("*.py")
    )
    spark_only = {"icecdc.engines.spark", "icecdc.engines.pyspark_compat"}  # Spark runs on Glue only
    modules = [m for m in modules if m not in spark_only]
    # Every module compiled from source is counted (a loader compiles only where no bytecode fits).
    script = (
        "import importlib, json, sys\n"
        "import importlib._bootstrap_external as external\n"
        "compiled, to_code = [], external.SourceLoader.source_to_code\n"
        "def counted(self, data, path, *args, **kwargs):\n"
        "    compiled.append(path)\n"
        "    return to_code(self, data, path, *args, **kwargs)\n"
        "external.SourceLoader.source_to_code = counted\n"
        "import zstandard\n"
        "for name in json.loads(sys.argv[1]): importlib.import_module(name)\n"
        "assert zstandard.ZstdDecompressor().decompress(zstandard.ZstdCompressor().compress(b'icecdc')) == b'icecdc'\n"
        "from opensearchpy import AWSV4SignerAuth\n"
        "import boto3\n"
        "for service in ('s3', 'glue', 'dynamodb', 'cloudwatch', 'secretsmanager', 'sts'):\n"
        "    boto3.client(service, region_name='us-east-1')\n"
        "print(json.dumps({'backend': zstandard.backend, 'compiled': compiled}))\n"
    )
    result = run_bundled(layer, code, [*modules, *LAZY_IMPORTS], script)
    assert result["backend"] == "cext"
    bundled = [path for path in result["compiled"] if path.startswith((str(code), str(layer)))]
    assert not bundled, (
        f"{len(bundled)} modules compiled at import, not shipped as bytecode (infra.bundling.BytecodeCompiler): {bundled[:5]}"
    )
