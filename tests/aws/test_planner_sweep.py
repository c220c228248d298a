"""The planner's sweep on a pool of threads: the same outcomes and the same job runs as one table at a
time, tables decided at once and passes applied one at a time, on real pyiceberg Glue-catalog tables
in moto (Glue Data Catalog, S3, DynamoDB, Glue jobs, CloudWatch) and osmem."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest
from opensearchpy import OpenSearch

import icecdc.aws.planner
import icecdc.sync
from icecdc.aws.contract import job_name
from icecdc.aws.deployed import runtime_config
from icecdc.aws.planner import Sweep, plan_and_start_each
from icecdc.config import Config
from icecdc.model import Checkpoint
from icecdc.state import StateStore, open_state_store
from icecdc.verify import diff_index
from tests.support.aws import REGION, Lake, aws_client, rows
from tests.support.faults import FaultProxy

NO_DOMAIN = "http://127.0.0.1:9"  # the planner only starts jobs


def lake_of_tables(lake: Lake) -> tuple[list[str], list[str]]:
    """Six configured tables: three with work, two caught up (after `catch_up`), one dropped."""
    with_work = [f"{lake.database}.busy_{i}" for i in range(3)]
    caught_up = [f"{lake.database}.quiet_{i}" for i in range(2)]
    for number, name in enumerate(with_work + caught_up):
        lake.create_table(name).append(rows(number, number + 10))
    dropped = f"{lake.database}.dropped"  # configured, not in the catalog: that table's error
    names = [with_work[0], caught_up[0], dropped, with_work[1], caught_up[1], with_work[2]]
    return names, caught_up


def deployed(lake: Lake, state_table: str, url: str, names: list[str]) -> tuple[Config, StateStore]:
    text = lake.config_file(url, names, planner_applies=url != NO_DOMAIN).read_text()
    config = runtime_config(text, state_table, REGION)
    return config, open_state_store(config.state)


def catch_up(lake: Lake, store: StateStore, name: str) -> None:
    """What a Glue run leaves when it has applied the table's current snapshot."""
    table = lake.catalog().load_table(name)
    current = table.current_snapshot()
    assert current is not None
    uuid, schema = str(table.metadata.table_uuid), table.metadata.current_schema_id
    store.complete(name, Checkpoint(uuid, current.snapshot_id, current.sequence_number, schema, ("id",)), [])


def create_jobs(glue: Any, stack: str, names: list[str]) -> None:
    for name in names:
        glue.create_job(
            Name=job_name(stack, name),
            Role="arn:aws:iam::123456789012:role/icecdc-job",
            Command={"Name": "glueetl", "ScriptLocation": "s3://assets/icecdc_job.py", "PythonVersion": "3"},
            ExecutionProperty={"MaxConcurrentRuns": 1},
            GlueVersion="5.1",
        )


@pytest.fixture
def meeting(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The first two tables' `has_work` wait for each other: two decisions must be in flight at once
    (a serial sweep breaks the barrier after its timeout, and that table fails)."""
    barrier, calls, lock = threading.Barrier(2, timeout=30), [0], threading.Lock()
    has_work = icecdc.aws.planner.has_work

    def meet(*args: Any, **kwargs: Any) -> bool:
        with lock:
            calls[0] += 1
            first_two = calls[0] <= 2
        if first_two:
            barrier.wait()
        return has_work(*args, **kwargs)

    monkeypatch.setattr(icecdc.aws.planner, "has_work", meet)
    yield


def test_the_parallel_sweep_decides_as_the_serial_one_and_starts_the_same_runs(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    names, caught_up = lake_of_tables(lake)
    config, store = deployed(lake, state_table, NO_DOMAIN, names)
    for name in caught_up:
        catch_up(lake, store, name)
    glue, cloudwatch = aws_client("glue", lake.moto_url), aws_client("cloudwatch", lake.moto_url)
    existing = [n for n in names if not n.endswith(".dropped")]
    create_jobs(glue, "serial", existing)
    create_jobs(glue, "parallel", existing)

    serial = plan_and_start_each(Sweep(config, store, glue, cloudwatch), names, "serial", workers=1)
    request.getfixturevalue("meeting")  # from here on, two tables' decisions must overlap
    parallel = plan_and_start_each(Sweep(config, store, glue, cloudwatch), names, "parallel", workers=4)
    store.close()

    def seen(outcomes: list[icecdc.aws.planner.TableOutcome]) -> list[dict[str, Any]]:
        return [{**asdict(o), "job_run_id": bool(o.job_run_id)} for o in outcomes]

    assert seen(parallel) == seen(serial)  # in the order of the names
    assert [o.table for o in parallel] == names
    assert [o.table for o in parallel if o.job_run_id] == [n for n in names if ".busy_" in n]
    [failed] = [o for o in parallel if o.error]
    assert failed.table.endswith(".dropped") and "does not exist" in (failed.error or "")

    def runs(stack: str) -> dict[str, list[dict[str, str]]]:
        return {n: [r["Arguments"] for r in glue.get_job_runs(JobName=job_name(stack, n))["JobRuns"]] for n in existing}

    assert runs("parallel") == runs("serial")
    assert all(len(runs("parallel")[n]) == 1 for n in names if ".busy_" in n)


def test_the_sweeps_threads_apply_one_table_at_a_time(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, osmem_server: Any
) -> None:
    url = str(osmem_server.clone().url)
    names = [f"{lake.database}.small_{i}" for i in range(4)]
    for number, name in enumerate(names):
        lake.create_table(name).append(rows(number, number + 10, number + 20))
    config, store = deployed(lake, state_table, url, names)
    in_flight, most, lock = [0], [0], threading.Lock()
    sync_table = icecdc.sync.sync_table

    def counted(*args: Any, **kwargs: Any) -> Any:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        try:
            return sync_table(*args, **kwargs)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(icecdc.sync, "sync_table", counted)
    glue, cloudwatch = aws_client("glue", lake.moto_url), aws_client("cloudwatch", lake.moto_url)
    outcomes = plan_and_start_each(Sweep(config, store, glue, cloudwatch), names, "sweep", workers=4)
    store.close()

    assert [(o.table, o.applied_snapshots, o.error) for o in outcomes] == [(n, 1, None) for n in names]
    assert most[0] == 1  # the Lambda's memory is sized for one pass
    for name in names:
        table = lake.catalog().load_table(name)
        diff = diff_index(table, ("id",), OpenSearch(hosts=[url]), name.split(".")[1])
        assert not diff, diff.summary()


def test_a_sweep_reads_the_opensearch_secret_once(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, osmem_server: Any, unique: str
) -> None:
    """Four tables applied by four threads: one client, one Secrets Manager read for the sweep
    (counted in front of moto), not one a table and another one an index."""
    url = str(osmem_server.clone().url)
    names = [f"{lake.database}.secret_{i}" for i in range(4)]
    for number, name in enumerate(names):
        lake.create_table(name).append(rows(number, number + 10))
    arn = aws_client("secretsmanager", lake.moto_url).create_secret(Name=f"os-{unique}", SecretString="s3cret")["ARN"]
    text = lake.config_file(url, names).read_text()
    text = text.replace(f"url: {url}", f"url: {url}\n  username: icecdc\n  password_secret_arn: {arn}")
    config = runtime_config(text, state_table, REGION)
    assert config.opensearch.password_secret_arn == arn
    store = open_state_store(config.state)
    glue, cloudwatch = aws_client("glue", lake.moto_url), aws_client("cloudwatch", lake.moto_url)
    with FaultProxy(lake.moto_url) as secrets_seen:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", secrets_seen.url)
        outcomes = plan_and_start_each(Sweep(config, store, glue, cloudwatch), names, "sweep", workers=4)
        reads = secrets_seen.count()
    store.close()
    assert [(o.table, o.applied_snapshots, o.error) for o in outcomes] == [(n, 1, None) for n in names]
    assert reads == 1
