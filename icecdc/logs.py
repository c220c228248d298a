"""What an entry logs: icecdc's own records at its level, and the clients' worth an operator's read.

The entries are the CLI, the planner Lambda and the Glue job. From the clients beneath icecdc, only
what is worth an operator's read is logged.
"""

from __future__ import annotations

import logging

# Libraries that log routine traffic at INFO: opensearch-py a line per request (2,000 bulk requests
# in an export of 10^6 rows, each a line of CloudWatch Logs in AWS), py4j each call into Spark's
# JVM. Their warnings (a failed request, a lost gateway) still show.
CHATTY_LIBRARIES = ("opensearch", "py4j")

# A command's summary (a pass's, an audit's, a repair's, a replay's), logged for the entries that
# print none (the Glue job, the Lambdas); the CLI prints its own on stdout and raises this logger
# to WARNING, so that a summary is said once.
SUMMARY_LOGGER = "icecdc.summary"


def quiet_chatty_libraries() -> None:
    """Raise the chatty libraries' loggers to WARNING.

    `icecdc -v` leaves opensearch-py's at DEBUG.
    """
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
