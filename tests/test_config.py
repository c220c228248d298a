"""Configuration errors name the culprit, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from icecdc.config import load_config, parse_config
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
    import yaml

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
        (lambda c: c["catalog"].pop("name"), "catalog.name is required"),
        (lambda c: c["spark"].update(master=3), "spark.master must be str"),
        (lambda c: c["opensearch"].update(username="u"), "username and opensearch.password go together"),
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
