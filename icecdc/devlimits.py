"""What `icecdc dev-server` (osmem) is for, and what to run instead for a larger table.

The CLI's help, the dev server's first lines and a pass that writes more than it is for say it.
"""

# What `icecdc dev-server` (osmem) is for: a table of up to this many rows. On 2 cores it indexed
# 200-1,150 documents/s and held 1.4 GB of memory at 90,000 documents (docs/getting-started.md).
DEV_SERVER_ROWS = 50_000
DEV_SERVER_RATE = "200-1,150 documents/s on 2 cores"
# What to run instead for a larger table: a real OpenSearch, here its container image.
REAL_OPENSEARCH = (
    "docker run -p 9200:9200 -e discovery.type=single-node -e DISABLE_SECURITY_PLUGIN=true "
    "opensearchproject/opensearch:2"
)
DEV_SERVER_LIMITS = (
    f"the dev server is for trying icecdc on tables of up to about {DEV_SERVER_ROWS:,} rows: "
    f"it indexes {DEV_SERVER_RATE} and holds every document in memory (1.4 GB at 90,000); "
    f"for a larger table run a real OpenSearch, e.g. `{REAL_OPENSEARCH}`"
)
