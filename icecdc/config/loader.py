"""How the configuration is read: strict sections, validation, and errors naming their keys.

Every section is strict (`Section`) and validates into a model. Pydantic's errors are worded as the
file's reader reads them, each naming its key's path in the file, e.g.
``tables[1].identifier_columns``. Values are strict: a number is never read from a string, and a
bool never from a number, nor the reverse. An explicit ``null`` means the default.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from icecdc.errors import ConfigError

# Stands for the path of the key a validator checks, in the messages the validators raise:
# `_message` puts the path there (a validator sees values, not where they are in the file).
AT = "{at}"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError(f"{AT} must not be empty")
    return value


def _scalar_text(value: Any) -> Any:
    """A catalog property or Spark setting as the string its consumer expects.

    YAML `true` becomes "true".
    """
    if isinstance(value, dict | list):
        # Pydantic reports ValueErrors.
        raise ValueError(f"{AT} must be a scalar setting, got {value!r}")  # noqa: TRY004
    return str(value).lower() if isinstance(value, bool) else str(value)


Text = Annotated[str, AfterValidator(_not_blank)]
Setting = Annotated[str, BeforeValidator(_scalar_text)]


class Section(BaseModel):
    """A section of the file: unknown keys refused, values strict, instances immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    # Keys whose `null` turns a feature off instead of meaning the default.
    null_turns_off: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {k: v for k, v in data.items() if v is not None or k in cls.null_turns_off}

    def as_mapping(self) -> dict[str, Any]:
        """The section's keys as the file names them (sections within stay models)."""
        keys = {
            field.alias or name: getattr(self, name)
            for name, field in type(self).model_fields.items()
        }
        return {**keys, **(self.__pydantic_extra__ or {})}

    def revised(self, **changes: Any) -> Self:
        """A copy with `changes`, validated as the file is.

        Keys are as the file names them; a section may be given as a mapping.
        `model_copy(update=...)` would check nothing.
        """
        return validated(type(self), {**self.as_mapping(), **changes})


def read_yaml(path: str | Path) -> Any:
    """The parsed YAML of a configuration file; ConfigError when it is missing or not YAML."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path} is not valid YAML: {exc}") from None


_M = TypeVar("_M", bound=BaseModel)


def validated(model: type[_M], raw: Any) -> _M:
    """`raw` validated as `model`, or ConfigError naming every problem by its path in the file."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        unions = {name for name, field in model.model_fields.items() if field.discriminator}
        raise ConfigError("; ".join(_message(e, unions) for e in exc.errors())) from None


# pydantic's errors as the file's reader reads them, filled from the error's path, input and ctx
# (a validator's own ValueError names its problem itself: see `AT`).
_PROBLEMS = {
    "extra_forbidden": "unknown key {path}",
    "missing": "{path} is required",
    "union_tag_invalid": "{path}.{discriminator} must be {expected_tags}, got {tag!r}",
    "literal_error": "{path} must be {expected}, got {input!r}",
    "greater_than": "{path} must be above {gt:g}, got {input!r}",
    "greater_than_equal": "{path} must be at least {ge:g}, got {input!r}",
    "bool_type": "{path} must be bool, got {input!r}",
    "string_type": "{path} must be str, got {input!r}",
    "int_type": "{path} must be int, got {input!r}",
    "float_type": "{path} must be int or float, got {input!r}",
    "list_type": "{path} must be list, got {input!r}",
    "tuple_type": "{path} must be list, got {input!r}",
    "dict_type": "{path} must be a mapping, got {input!r}",
    "model_type": "{path} must be a mapping, got {input!r}",
    "model_attributes_type": "{path} must be a mapping, got {input!r}",
}


def _path(loc: tuple[int | str, ...], unions: set[str]) -> str:
    """pydantic's location of an error as the key's path in the file: ``tables[0].index``.

    A discriminated union (`unions`: the model's fields that are one) puts the chosen variant's tag
    into the location (state.dynamodb.table); the file has no such key."""
    if loc[:1] and loc[0] in unions:
        loc = loc[:1] + loc[2:]
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _message(error: ErrorDetails, unions: set[str]) -> str:
    path, ctx = _path(error["loc"], unions) or "the configuration", error.get("ctx", {})
    if error["type"] == "value_error":
        return str(ctx["error"]).replace(AT, path)
    # pydantic quotes them: "'type'", "'sqlite', 'dynamodb'"
    if error["type"] == "union_tag_invalid":
        ctx = {
            **ctx,
            "discriminator": ctx["discriminator"].strip("'"),
            # enum tags print as "<StateStoreType.SQLITE: 'sqlite'>": keep what the file would say
            "expected_tags": re.sub(r"<\w+\.\w+: ('[^']*')>", r"\1", ctx["expected_tags"]).replace(
                ", ", " or "
            ),
        }
    return _PROBLEMS.get(error["type"], "{path}: {msg}").format(
        path=path, input=error["input"], msg=error["msg"], **ctx
    )
