"""Where the configuration file is when a command is not told: `$ICECDC_CONFIG`, else a default.

The default is `./icecdc.yaml`, what `icecdc init` writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from icecdc.errors import ConfigError

DEFAULT_CONFIG = Path("icecdc.yaml")
CONFIG_VARIABLE = "ICECDC_CONFIG"


def config_path(given: Path | None, environ: Mapping[str, str], must_exist: bool = True) -> Path:
    """The configuration file: `given` (--config), else `$ICECDC_CONFIG`, else ./icecdc.yaml.

    ConfigError in one line naming what was looked for when it does not exist (`must_exist`)."""
    if given is not None:
        return given  # the loader names a missing file given explicitly
    from_environment = environ.get(CONFIG_VARIABLE)
    path = Path(from_environment) if from_environment else DEFAULT_CONFIG
    if must_exist and not path.is_file():
        where = f"no --config, no ${CONFIG_VARIABLE}, and ./{path}"
        if from_environment:
            where = f"${CONFIG_VARIABLE} names {path}"
        raise ConfigError(
            f"no configuration file: {where}, which does not exist; "
            "give --config PATH, or write one with `icecdc init --catalog-uri URI --table db.table`"
        )
    return path
