"""Configuration errors name the culprit, before anything runs."""

from __future__ import annotations

import pickle
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from icecdc.config import DynamoDbStateConfig, SparkConfig, load_config, parse_config
from icecdc.destination.capabilities import Capabilities, DestinationKind
from icecdc.errors import ConfigError

VALID = """
catalog:
  name: lake
  type: sql
  uri: sqlite:////tmp/x/catalog.db
  warehouse: file:///tmp/x/warehouse
state:
  type: sqlite
  path: /tmp/x/state.db
opensearch:
  url: http://127.0.0.1:9200
spark:
  master: local[2]
  conf:
    spark.sql.shuffle.partitions: 4
tables:
  - name: db.orders
    index: orders
    identifier_columns: [id]
    export: true
  - name: db.returns
"""


def test_the_documented_example_parses(tmp_path: Path) -> None:
    path = tmp_path / "icecdc.yaml"
    path.write_text(VALID)
    config = load_config(path)
    assert config.catalog.properties == {
        "type": "sql",
        "uri": "sqlite:////tmp/x/catalog.db",
        "warehouse": "file:///tmp/x/warehouse",
    }
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "4"}
    assert config.tables[0].identifier_columns == ("id",)
    assert config.tables[1].index == "returns" and config.tables[1].identifier_columns is None


def base() -> dict:
    return yaml.safe_load(VALID)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.update(unknown=1), "unknown key unknown"),
        (lambda c: c["tables"][0].update(identifer_columns=["id"]), r"unknown key tables\[0\].identifer_columns"),
        (lambda c: c["state"].update(type="redis"), "state.type must be 'sqlite' or 'dynamodb'"),
        (lambda c: c["state"].pop("path"), "state.path is required"),
        (lambda c: c["opensearch"].update(url="localhost:9200"), "opensearch.url must start with http"),
        (lambda c: c["tables"][0].update(export="yes"), r"tables\[0\].export must be bool"),
        (lambda c: c["tables"][0].update(identifier_columns="id"), r"tables\[0\].identifier_columns must be list"),
        (lambda c: c["tables"][0].update(identifier_columns=[]), r"tables\[0\].identifier_columns must be a non-empty list"),
        (lambda c: c["tables"][0].update(index="Orders"), r"tables\[0\].index 'Orders' is not a valid"),
        (lambda c: c["tables"][0].update(name="orders"), r"tables\[0\].name must be '<namespace>.<table>'"),
        (lambda c: c["tables"].append({"name": "db.orders"}), "lists 'db.orders' more than once"),
        (lambda c: c.update(tables=[]), "tables must list at least one entry"),
        (
            lambda c: c["tables"][1].update(index="orders"),
            r"tables\[0\] \('db.orders'\) and tables\[1\] \('db.returns'\) both write index 'orders'",
        ),
        (
            lambda c: c["tables"].append({"name": "sales.returns"}),  # the default index is the table's last part
            r"tables\[1\] \('db.returns'\) and tables\[2\] \('sales.returns'\) both write index 'returns'",
        ),
        (
            lambda c: c["tables"][1].update(index="orders-2024"),  # the form of the generations of 'orders'
            r"tables\[1\] \('db.returns'\) writes index 'orders-2024', a name of the form of the generations of tables\[0\]",
        ),
        (lambda c: c["tables"][0].update(where="region = "), r"tables\[0\].where 'region = ' is not an Iceberg expression"),
        (
            lambda c: c["tables"][0].update(columns=["id"], exclude_columns=["amount"]),
            r"tables\[0\]: set columns \(the index's columns\) or exclude_columns \(all but these\), not both",
        ),
        (lambda c: c["tables"][0].update(columns=[]), r"tables\[0\].columns must be a non-empty list"),
        (lambda c: c["tables"][0].update(exclude_columns=["a", "a"]), r"tables\[0\].exclude_columns lists a column twice"),
        (lambda c: c["tables"][0].update(routing=["region"]), r"tables\[0\].routing must be str"),
        (
            lambda c: c["tables"][0].update(index=None, columns=["id"], indexes=[{"index": "a"}]),
            r"tables\[0\]: with indexes, set columns in each entry of indexes, not on the table",
        ),
        (lambda c: c["tables"][0].update(indexes=[]), r"tables\[0\].indexes must list at least one index"),
        (
            lambda c: c["tables"][0].update(indexes=[{"index": "a"}, {"index": "a", "where": "x = 1"}]),
            r"tables\[0\].indexes lists index 'a' more than once",
        ),
        (
            lambda c: c["tables"][0].update(indexes=[{"index": "a", "colums": ["x"]}]),
            r"unknown key tables\[0\].indexes\[0\].colums",
        ),
        (
            lambda c: c["tables"][0].update(indexes=[{"index": "returns"}]),
            r"tables\[0\] \('db.orders'\) and tables\[1\] \('db.returns'\) both write index 'returns'",
        ),
        (lambda c: c["catalog"].pop("name"), "catalog.name is required"),
        (lambda c: c["spark"].update(master=3), "spark.master must be str"),
        (
            lambda c: c["opensearch"].update(username="u"),
            r"username and opensearch.password \(or password_secret_arn\) go together",
        ),
    ],
)
def test_bad_values_are_named(edit, message: str) -> None:
    config = base()
    edit(config)
    with pytest.raises(ConfigError, match=message):
        parse_config(config)


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: [")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_unknown_table_name_is_named() -> None:
    with pytest.raises(ConfigError, match="'db.nope' is not in the configuration"):
        parse_config(base()).table("db.nope")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.update(state={"type": "dynamodb"}), "state.table is required"),
        (lambda c: c.update(state={"type": "dynamodb", "table": "t", "path": "x"}), "unknown key state.path"),
        (
            lambda c: c.update(state={"type": "dynamodb", "table": "t", "done_ttl_days": 0}),
            "state.done_ttl_days must be at least 1",
        ),
        (lambda c: c["state"].update(lease_seconds=True), "state.lease_seconds must be int or float, got True"),
        (lambda c: c["state"].update(lease_seconds=0), "state.lease_seconds must be above 0, got 0"),
        (
            lambda c: c["tables"][0].update(identifier_columns=["id", "id"]),
            r"tables\[0\].identifier_columns lists a column twice",
        ),
        (lambda c: c["tables"][0].update(identifier_columns=["id", 3]), r"tables\[0\].identifier_columns\[1\] must be str"),
        (lambda c: c["catalog"].update(nested={"a": 1}), "catalog.nested must be a scalar setting"),
        (lambda c: c["spark"].update(conf=[]), "spark.conf must be a mapping"),
        (lambda c: c.update(dead_letter={"path": "relative/dir"}), "dead_letter.path must be an absolute directory or an s3://"),
        (lambda c: c.update(dead_letter={"pth": "/x"}), "unknown key dead_letter.pth"),
        (lambda c: c.update(aws={"warehouse_buckets": ["b/p"]}), r"aws.warehouse_buckets must list bucket names"),
        (lambda c: c.update(aws={"warehouse_buckets": ["b"], "stack_name": "1x"}), "aws.stack_name must be letters"),
        (lambda c: c.update(aws={"warehouse_buckets": ["b"], "glue_max_workers": 1}), "aws.glue_max_workers must be at least 2"),
        (
            lambda c: c.update(aws={"warehouse_buckets": ["b"], "warehouse_kms_key_arns": ["alias/lake"]}),
            "aws.warehouse_kms_key_arns must be KMS key ARNs",
        ),
        (
            lambda c: c.update(aws={"warehouse_buckets": ["b"], "password_secret_kms_key_arn": "1234abcd"}),
            "aws.password_secret_kms_key_arn must be KMS key ARNs",
        ),
        (
            lambda c: c.update(aws={"warehouse_buckets": ["b"], "planner_reserved_concurrency": 1}),
            "aws.planner_reserved_concurrency must be at least 2",
        ),
        (
            lambda c: c.update(aws={"warehouse_buckets": ["b"], "create_domain": True, "opensearch_domain_arn": "arn"}),
            "aws: choose create_domain or opensearch_domain_arn",
        ),
        (
            lambda c: c.update(aws={"warehouse_buckets": ["b"], "done_ttl_days": 3}),
            "aws.done_ttl_days moved to state.done_ttl_days",
        ),
        (lambda c: c["opensearch"].update(aws_service="x"), "opensearch.aws_service must be 'es' or 'aoss', got 'x'"),
        (lambda c: c["opensearch"].update(username="u", password="p", aws_region="r"), "opensearch: choose basic auth"),
    ],
)
def test_more_bad_values_are_named(edit, message: str) -> None:
    config = base()
    edit(config)
    with pytest.raises(ConfigError, match=message):
        parse_config(config)


def test_defaults_and_nulls() -> None:
    config = base()
    config["state"] = {"type": None, "path": "/tmp/s.db", "lease_seconds": None}  # null means the default
    config["spark"] = None
    config["tables"][0]["index"] = None
    config["aws"] = {"warehouse_buckets": ["b"], "dead_letter_prefix": "/letters//"}
    parsed = parse_config(config)
    assert (parsed.state.type, parsed.state.lease_seconds) == ("sqlite", 60.0)
    assert parsed.spark == SparkConfig() and parsed.tables[0].index == "orders"
    assert parsed.aws is not None and parsed.aws.dead_letter_prefix == "letters/" and parsed.aws.stack_name == "icecdc"
    assert parsed.dead_letter is None
    config["state"] = {"type": "dynamodb", "table": "t", "lease_seconds": 5}
    state = parse_config(config).state
    assert isinstance(state, DynamoDbStateConfig) and (state.done_ttl_days, state.lease_seconds) == (7, 5.0)


def test_sections_travel_to_executors_and_revisions_are_validated() -> None:
    config = parse_config(base())
    assert pickle.loads(pickle.dumps(config.opensearch)) == config.opensearch
    assert pickle.loads(pickle.dumps(config)) == config
    assert config.with_dead_letter("s3://bucket/letters/").dead_letter == "s3://bucket/letters/"
    with pytest.raises(ConfigError, match="dead_letter.path must be an absolute directory"):
        config.with_dead_letter("letters")
    with pytest.raises(ConfigError, match="url must start with http"):
        config.opensearch.revised(url="localhost")


def test_runtime_config_revises_the_parsed_file() -> None:
    from icecdc.aws.deployed import runtime_config

    raw = base()
    raw["state"] = {"type": "dynamodb", "table": "placeholder", "lease_seconds": 30, "done_ttl_days": 14}
    raw["opensearch"].update(username="u", password="p")
    config = runtime_config(yaml.safe_dump(raw), "stack-state", "eu-west-1", "https://domain/", {"py-io-impl": "fsspec"})
    assert config.state == DynamoDbStateConfig(table="stack-state", region="eu-west-1", lease_seconds=30, done_ttl_days=14)
    assert config.spark.master is None and config.spark.conf == {"spark.sql.shuffle.partitions": "4"}
    signed = config.opensearch
    assert (signed.url, signed.aws_region, signed.aws_service, signed.username) == ("https://domain", "eu-west-1", "es", None)
    assert config.catalog.properties["py-io-impl"] == "fsspec" and config.catalog.properties["type"] == "sql"
    # a local file's sqlite state: the stack's table, the file's lease, the default TTL
    config = runtime_config(VALID, "stack-state")
    assert config.state == DynamoDbStateConfig(table="stack-state")
    assert config.opensearch == parse_config(base()).opensearch
    with pytest.raises(ConfigError, match="state.path is required"):
        runtime_config(VALID.replace("  path: /tmp/x/state.db\n", ""), "stack-state")


def test_credentials_never_travel_in_the_url_or_show_in_a_repr() -> None:
    raw = base()
    raw["opensearch"] = {"url": "https://admin:s3cret@search.example.com"}
    with pytest.raises(ConfigError, match=r"opensearch.url must not carry credentials") as refused:
        parse_config(raw)
    assert "s3cret" not in str(refused.value)
    raw["opensearch"] = {"url": "https://search.example.com", "username": "admin", "password": "s3cret"}
    config = parse_config(raw)
    assert config.opensearch.password == "s3cret"
    assert "s3cret" not in repr(config) and "s3cret" not in str(config)


def test_opensearch_serverless_is_read_as_a_collection_signed_with_sigv4() -> None:
    raw = base()
    raw["opensearch"] = {"url": "https://x.us-east-1.aoss.amazonaws.com", "aws_region": "us-east-1", "aws_service": "aoss"}
    capabilities = Capabilities.of(parse_config(raw).opensearch)
    assert capabilities.kind == DestinationKind.SERVERLESS
    assert not (capabilities.versions or capabilities.refresh or capabilities.cluster_info)


@pytest.mark.parametrize(
    "signing",
    [{"aws_region": None}, {"username": "admin", "password": "pw"}],
    ids=["unsigned", "basic auth"],
)
def test_opensearch_serverless_without_sigv4_is_refused_in_one_line(signing: dict[str, Any]) -> None:
    raw = base()
    raw["opensearch"] = {"url": "https://x.us-east-1.aoss.amazonaws.com", "aws_region": "us-east-1", "aws_service": "aoss"}
    raw["opensearch"].update(signing)
    with pytest.raises(ConfigError, match=r"opensearch.aws_service 'aoss' \(a Serverless collection\) takes SigV4 only"):
        parse_config(raw)


def test_runtime_config_signs_a_created_collections_endpoint_for_aoss() -> None:
    """The stack hands the created collection's endpoint: signed for `aoss` as configured (never
    `es`), the file's lease, landing and visibility bounds kept."""
    from icecdc.aws.deployed import runtime_config

    raw = base()
    raw["state"] = {"type": "sqlite", "path": "/tmp/x/state.db", "lease_seconds": 90}
    placeholder = "https://placeholder.eu-west-1.aoss.amazonaws.com"
    raw["opensearch"] = {"url": placeholder, "aws_region": "eu-west-1", "aws_service": "aoss"}
    raw["opensearch"].update(visibility_seconds=12, landing_seconds=40)
    endpoint = "https://abc123.eu-west-1.aoss.amazonaws.com"
    config = runtime_config(yaml.safe_dump(raw), "stack-state", "eu-west-1", endpoint)
    signed = config.opensearch
    assert (signed.url, signed.aws_region, signed.aws_service) == (endpoint, "eu-west-1", "aoss")
    assert (signed.visibility_seconds, signed.landing_seconds) == (12, 40)
    assert config.state == DynamoDbStateConfig(table="stack-state", region="eu-west-1", lease_seconds=90)
    assert Capabilities.of(signed).kind == DestinationKind.SERVERLESS


def test_the_index_shaping_examples_of_the_docs_parse() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "shaping.md").read_text()
    examples = [block.split("```", 1)[0] for block in page.split("```yaml\n")[1:]]
    assert len(examples) == 3
    for example in examples:
        config = parse_config({**base(), **yaml.safe_load(example)})
        assert all(configured.config.index for table in config.tables for configured in table.each_index())


SECRET = 987654321


@pytest.mark.parametrize("value", [SECRET, [SECRET, "x"], {"k": SECRET}, float(SECRET), {"password": SECRET}])
@pytest.mark.parametrize(
    "place",
    [
        lambda c, v: c["opensearch"].update(username="u", password=v),
        lambda c, v: c["catalog"].update({"s3.secret-access-key": v}),
        lambda c, v: c["catalog"].update(token=v),
        lambda c, v: c["spark"]["conf"].update({"spark.hadoop.fs.s3a.secret.key": v}),
        lambda c, v: c.update(opensearch=[{"url": "http://x", "password": v}]),  # a mapping within
    ],
)
def test_no_secret_value_is_quoted_whatever_its_yaml_type(place, value) -> None:
    config = base()
    place(config, value)
    try:
        parse_config(config)
    except ConfigError as refused:
        assert str(SECRET) not in str(refused) and str(float(SECRET)) not in str(refused), refused
        assert "\n" not in str(refused)


def test_a_yaml_syntax_error_is_one_line_without_the_line_it_is_on(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("opensearch:\n  url: http://x\n  password: hunter2: x\n")
    with pytest.raises(ConfigError, match=r"not valid YAML: line 3, column 20: mapping values") as refused:
        load_config(bad)
    assert "hunter2" not in str(refused.value) and "\n" not in str(refused.value)
    bad.write_text('opensearch:\n  password: "hunter2\n')
    with pytest.raises(ConfigError, match="while scanning a quoted scalar; found unexpected end") as refused:
        load_config(bad)
    assert "hunter2" not in str(refused.value)


def laughs(levels: int, at: str) -> str:
    """A "billion laughs" configuration: 9**levels strings from a few hundred bytes, at `at`."""
    lines = ["  x0: &x0 [" + ", ".join(['"lol"'] * 9) + "]"]
    lines += [f"  x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, levels)]
    bomb = f"*x{levels - 1}"
    tables = bomb if at == "tables" else "[{name: db.t}]"
    name = bomb if at == "name" else "lake"
    return (
        "spark:\n  conf:\n" + "\n".join(lines).replace("  x", "    x") + "\n"
        f"catalog: {{name: {name}}}\nstate: {{path: /tmp/s.db}}\nopensearch: {{url: 'http://x'}}\n"
        f"tables: {tables}\n"
    )


@pytest.mark.parametrize(
    ("levels", "at", "longest"), [(9, "name", 300), (9, "tables", 300), (5, "name", 300), (5, "tables", 700)]
)
def test_a_yaml_alias_bomb_is_one_short_line_in_bounded_memory(tmp_path: Path, levels: int, at: str, longest: int) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(laughs(levels, at))
    assert path.stat().st_size < 1000
    started = time.monotonic()
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert time.monotonic() - started < 2  # 9 levels: 387 million strings, were it expanded
    assert len(message) < longest and "\n" not in message, message
    if levels == 9:
        assert "aliases expand it to more than 200,000 values" in message


def test_an_alias_holding_itself_is_refused(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="line 1: an alias refers to a node that holds it"):
        load_config(tmp_path / "loop.yaml")


def test_an_error_lists_a_few_problems_and_counts_the_rest() -> None:
    config = base()
    config["tables"] = [{"name": f"db.t{n}", "export": n} for n in range(10)]
    with pytest.raises(ConfigError, match=r"tables\[2\].export must be bool, got 2; and 7 more problems$"):
        parse_config(config)


@pytest.mark.parametrize(
    ("index", "rule"),
    [
        (".", "an index may not be named '.' or '..'"),
        ("..", "an index may not be named '.' or '..'"),
        ("a" * 231, "it is 231 bytes, over 230: OpenSearch allows 255, and icecdc appends up to 25"),
        ("é" * 116, "it is 232 bytes, over 230"),  # bytes, not characters
        ("Orders", "it must be lower case"),
        *((f"{c}orders", "it must not start with _, - or +") for c in "_-+"),
        *(
            (f"or{c}ders", rf"it must hold no space nor any of .* \(it holds {'space' if c == ' ' else re.escape(c)}\)")
            for c in ' \\/*?"<>|,#:'
        ),
    ],
)
def test_an_index_name_opensearch_refuses_is_refused_naming_the_rule(index: str, rule: str) -> None:
    config = base()
    config["tables"][0]["index"] = index
    with pytest.raises(ConfigError, match=r"tables\[0\].index .* is not a valid OpenSearch index name: " + rule):
        parse_config(config)
    config["tables"][0] = {"name": "db.orders", "indexes": [{"index": index}]}
    with pytest.raises(ConfigError, match=r"tables\[0\].indexes\[0\].index .* is not a valid OpenSearch index name"):
        parse_config(config)


def test_the_longest_index_name_leaves_room_for_the_names_icecdc_makes() -> None:
    from icecdc.config.runtime import INDEX_SUFFIX_BYTES, MAX_INDEX_NAME_BYTES
    from icecdc.destination.index.alias import generation
    from icecdc.destination.index.ownership import KEPT_SUFFIX

    config = base()
    config["tables"][0]["index"] = name = "a" * MAX_INDEX_NAME_BYTES
    assert parse_config(config).tables[0].index == name
    kept = f"{name}{KEPT_SUFFIX}20261201120000"
    assert len(kept) <= 255 and len(generation(name, 10**12)) <= 255
    assert len(kept) - len(name) == INDEX_SUFFIX_BYTES


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.update(engine={"use": "sprak"}), "engine.use must be 'auto', 'spark' or 'in_process', got 'sprak'"),
        (lambda c: c["state"].update(type="redis"), "state.type must be 'sqlite' or 'dynamodb', got 'redis'"),
    ],
)
def test_a_choice_is_worded_by_its_plain_values(edit, message: str) -> None:
    """Reproduced: `engine.use must be <EngineChoice.AUTO: 'auto'>, ...`."""
    config = base()
    edit(config)
    with pytest.raises(ConfigError) as refused:
        parse_config(config)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            {"tables": [{"name": "db.t", "index_takeover": True}]},
            r"tables\[0\].index_takeover \('t'\) cannot be used with a Serverless collection: .*_reindex",
        ),
        (
            {"tables": [{"name": "db.t", "settings": {"index": {"number_of_replicas": 2}}}]},
            r"tables\[0\].settings \('t'\) sets number_of_replicas: a Serverless collection manages",
        ),
        ({"tables": [{"name": "db.t", "settings": {"index.refresh_interval": "1s"}}]}, r"sets refresh_interval"),
        ({"state": {"lease_seconds": 30}}, r"state.lease_seconds must be over 52.5 with a Serverless collection"),
    ],
    ids=["takeover", "replicas", "refresh interval", "short lease"],
)
def test_what_a_serverless_collection_cannot_do_is_refused_naming_the_key(change: dict[str, Any], refusal: str) -> None:
    raw = base()
    raw["opensearch"] = {"url": "https://x.us-east-1.aoss.amazonaws.com", "aws_region": "us-east-1", "aws_service": "aoss"}
    raw["state"] = {**raw.get("state", {}), **change.pop("state", {})}
    raw.update(change)
    with pytest.raises(ConfigError, match=refusal):
        parse_config(raw)
