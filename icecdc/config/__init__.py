"""The configuration: the runtime model, the deploy-only model, and how a file is read.

`runtime` is the runtime model. `deploy` is the deploy-only model, section `aws:`, which `infra/`
and `icecdc doctor` read. `loader` reads a file and words its errors.
"""

from icecdc.config.deploy import LOG_RETENTION_DAYS, AwsConfig, SubnetConfig, VpcConfig
from icecdc.config.loader import parse_yaml
from icecdc.config.runtime import (
    FENCE_SHARE,
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
    TableIndexConfig,
    TableKeys,
    load_config,
    parse_config,
)

__all__ = [
    "FENCE_SHARE",
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
    "TableIndexConfig",
    "TableKeys",
    "VpcConfig",
    "load_config",
    "parse_config",
    "parse_yaml",
]
