"""The one port in front of the search engine: the client, the index's owner, the writes.

`client` opens the OpenSearch client (secrets read once) and names its errors; `index` owns the
index (mappings from the schema, the alias and its generations); `sink` writes documents as the
destination allows and classifies refusals. Nothing outside this package imports `opensearchpy`.
"""
