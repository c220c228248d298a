"""icecdc: keep an OpenSearch index equal to an Apache Iceberg table, commit by commit."""

__version__ = "0.1.0"
