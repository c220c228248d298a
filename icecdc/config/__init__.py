"""The configuration: the runtime model (`runtime`), the deploy-only model (`deploy`: section `aws:`,
read by `infra/` and `icecdc doctor`), and how a file is read and its errors worded (`loader`)."""

from icecdc.config.deploy import LOG_RETENTION_DAYS, AwsConfig, SubnetConfig, VpcConfig
from icecdc.config.runtime import (
    BatchConfig,
    CatalogConfig,
    Config,
    DeadLetterConfig,
    DynamoDbStateConfig,
    EngineConfig,
    IndexConfig,
    OpenSearchConfig,
    SparkConfig,
    SqliteStateConfig,
    StateConfig,
    StringMapping,
    TableConfig,
    load_config,
    parse_config,
)

__all__ = [
    "LOG_RETENTION_DAYS",
    "AwsConfig",
    "BatchConfig",
    "CatalogConfig",
    "Config",
    "DeadLetterConfig",
    "DynamoDbStateConfig",
    "EngineConfig",
    "IndexConfig",
    "OpenSearchConfig",
    "SparkConfig",
    "SqliteStateConfig",
    "StateConfig",
    "StringMapping",
    "SubnetConfig",
    "TableConfig",
    "VpcConfig",
    "load_config",
    "parse_config",
]
