"""The errors icecdc raises on purpose; each message names its culprit."""


class IcecdcError(Exception):
    """Base of every error icecdc raises deliberately."""


class ConfigError(IcecdcError):
    """The configuration file is malformed; raised before anything is written."""


class PlanningError(IcecdcError):
    """A table's history cannot be turned into work items; nothing is planned or advanced."""


class ProcessingError(IcecdcError):
    """A batch could not be applied; the checkpoint stays where it was."""


class SinkError(ProcessingError):
    """OpenSearch refused writes for a reason other than a newer version."""
