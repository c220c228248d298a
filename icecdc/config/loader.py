"""How the configuration is read: strict sections, validation, and errors naming their keys.

Every section is strict (`Section`) and validates into a model. Pydantic's errors are worded as the
file's reader reads them, each naming its key's path in the file, e.g.
``tables[1].identifier_columns``. Values are strict: a number is never read from a string, and a
bool never from a number, nor the reverse. An explicit ``null`` means the default.
"""

from __future__ import annotations

import re
import reprlib
from itertools import islice
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


# The keys whose values are secrets (opensearch.password, a catalog's s3.secret-access-key or
# token, a Spark setting's fs.s3a.secret.key): no error quotes them. A key ending in _arn
# names a secret and holds none.
_SECRET_KEY = re.compile(r"password|secret|token|credential|private.?key|account.?key", re.I)


def is_secret(key: object) -> bool:
    """Whether the key `key` holds a secret, which no message may quote."""
    return (
        isinstance(key, str)
        and _SECRET_KEY.search(key) is not None
        and not key.lower().endswith(("_arn", "-arn", ".arn"))
    )


class _Quoting(reprlib.Repr):
    """A bounded repr: a few items of a few levels (a YAML alias bomb quotes no gigabytes).

    The value of a secret key within is not shown.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 3, 4, 4, 4
        self.maxstring = self.maxother = 60

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        pieces = [
            f"{self.repr1(key, level - 1)}: "
            + ("<secret>" if is_secret(key) else self.repr1(value, level - 1))
            for key, value in islice(x.items(), self.maxdict)
        ]
        return "{" + ", ".join(pieces + (["..."] if len(x) > self.maxdict else [])) + "}"


# What a message quotes of a value, at most.
QUOTE_CHARS = 80


def quoted(value: Any) -> str:
    """`value` as an error quotes it: its repr, bounded in length and in work, secrets hidden."""
    text = _Quoting().repr(value)
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _kind(value: Any) -> str:
    """What a value is, named without quoting it: "an int", "a list"."""
    names: dict[type, str] = {dict: "mapping", list: "list", tuple: "list"}
    name = names.get(type(value), type(value).__name__)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _scalar_text(value: Any) -> Any:
    """A catalog property or Spark setting as the string its consumer expects.

    YAML `true` becomes "true".
    """
    if isinstance(value, dict | list):
        # Pydantic reports ValueErrors. The value is not quoted: the setting may be a secret.
        raise ValueError(f"{AT} must be a scalar setting, got {_kind(value)}")  # noqa: TRY004
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
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist") from None
    return parse_yaml(text, f"configuration file {path}")


# The nodes a configuration may have once its aliases are expanded: a file of a thousand tables
# has some tens of thousands. A "billion laughs" file of 9 levels would expand to 387 million.
MAX_EXPANDED_NODES = 200_000


def parse_yaml(text: str, source: str = "the configuration") -> Any:
    """`text` parsed as YAML (as `yaml.safe_load`); ConfigError naming `source` when it is not.

    Its aliases are counted before any value is built: a document that would expand to more
    than `MAX_EXPANDED_NODES` nodes, or whose alias holds itself, is refused.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _expanded_size(node, {}, set())
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not valid YAML: {_yaml_problem(exc)}") from None
    except _TooLarge as exc:
        raise ConfigError(f"{source} is refused: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{source} is refused: it nests too deeply") from None
    finally:
        loader.dispose()


class _TooLarge(Exception):
    """The document's aliases expand too far, or an alias holds itself."""


def _expanded_size(node: yaml.Node, sizes: dict[int, int], within: set[int]) -> int:
    """The nodes `node` stands for once every alias in it is expanded; _TooLarge past the bound.

    `sizes` holds each node counted (an alias is the node it names: counted once), `within` the
    nodes being counted.
    """
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in within:
        mark = node.start_mark
        raise _TooLarge(f"line {mark.line + 1}: an alias refers to a node that holds it")
    within.add(id(node))
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    size = 1
    for child in children:
        size += _expanded_size(child, sizes, within)
        if size > MAX_EXPANDED_NODES:
            raise _TooLarge(
                f"its aliases expand it to more than {MAX_EXPANDED_NODES:,} values "
                "(a YAML alias bomb?)"
            )
    within.discard(id(node))
    sizes[id(node)] = size
    return size


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's error on one line, where it is and what: without the file's line it quotes.

    That line may hold a secret.
    """
    if not isinstance(error, yaml.MarkedYAMLError):
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    what = "; ".join(part for part in (error.context, error.problem) if part)
    return where + what


_M = TypeVar("_M", bound=BaseModel)


def validated(model: type[_M], raw: Any) -> _M:
    """`raw` validated as `model`, or ConfigError naming every problem by its path in the file."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        unions = {name for name, field in model.model_fields.items() if field.discriminator}
        problems = [_message(e, unions) for e in exc.errors()[: MAX_PROBLEMS + 1]]
        raise ConfigError(_listed(problems, exc.error_count())) from None


# The problems an error lists, and the characters of each: the longest a validator words is
# under 400 (a value it quotes is cut at `QUOTE_CHARS`).
MAX_PROBLEMS = 3
PROBLEM_CHARS = 500


def _listed(problems: list[str], count: int) -> str:
    """The first problems, each cut to `PROBLEM_CHARS`, on one line, saying how many more."""
    shown = [p if len(p) <= PROBLEM_CHARS else p[: PROBLEM_CHARS - 1] + "…" for p in problems]
    more = count - MAX_PROBLEMS
    tail = [f"and {more} more problem{'s' if more > 1 else ''}"] if more > 0 else []
    return "; ".join(shown[:MAX_PROBLEMS] + tail).replace("\n", " ")


# pydantic's errors as the file's reader reads them, filled from the error's path, input and ctx
# (a validator's own ValueError names its problem itself: see `AT`).
_PROBLEMS = {
    "extra_forbidden": "unknown key {path}",
    "missing": "{path} is required",
    "union_tag_invalid": "{path}.{discriminator} must be {expected_tags}, got {tag!r}",
    "literal_error": "{path} must be {expected}, got {input}",
    "greater_than": "{path} must be above {gt:g}, got {input}",
    "greater_than_equal": "{path} must be at least {ge:g}, got {input}",
    "bool_type": "{path} must be bool, got {input}",
    "string_type": "{path} must be str, got {input}",
    "int_type": "{path} must be int, got {input}",
    "float_type": "{path} must be int or float, got {input}",
    "list_type": "{path} must be list, got {input}",
    "tuple_type": "{path} must be list, got {input}",
    "dict_type": "{path} must be a mapping, got {input}",
    "model_type": "{path} must be a mapping, got {input}",
    "model_attributes_type": "{path} must be a mapping, got {input}",
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


def _shown(value: Any, secret: bool) -> str:
    """`value` as a message quotes it; a secret's only by its kind."""
    return f"{_kind(value)} (not shown: a secret)" if secret else quoted(value)


_ENUM_MEMBER = re.compile(r"<\w+\.\w+: ('[^']*')>")


def _message(error: ErrorDetails, unions: set[str]) -> str:
    path, ctx = _path(error["loc"], unions) or "the configuration", error.get("ctx", {})
    secret = any(is_secret(part) for part in error["loc"])
    if error["type"] == "value_error":
        message = str(ctx["error"]).replace(AT, path)
        value = error["input"]
        if secret and (repr(value) in message or (str(value) and str(value) in message)):
            return f"{path} is not valid; its value, a secret, is not shown"
        return message
    # Enum members print as "<EngineChoice.AUTO: 'auto'>": each as the file would say it, 'auto'.
    ctx = {k: _ENUM_MEMBER.sub(r"\1", v) if isinstance(v, str) else v for k, v in ctx.items()}
    # pydantic quotes them: "'type'", "'sqlite', 'dynamodb'"
    if error["type"] == "union_tag_invalid":
        ctx = {
            **ctx,
            "discriminator": ctx["discriminator"].strip("'"),
            "expected_tags": ctx["expected_tags"].replace(", ", " or "),
        }
    msg = _ENUM_MEMBER.sub(r"\1", error["msg"])
    return _PROBLEMS.get(error["type"], "{path}: {msg}").format(
        path=path, input=_shown(error["input"], secret), msg=msg, **ctx
    )
