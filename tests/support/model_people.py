"""What people do to icecdc, as rules of the model-based test (`PipelineMachine` mixes them in).

The machine's other rules act on the table and the cluster; these act on icecdc itself: an operator
changes its configuration between syncs (`reconfigure`), or runs one of its commands (`operate_icecdc`:
audit, verify, repair, dead-letters replay), which may die at a bulk request. The invariants they
add: an operator's command exits 0 or 1 (2 only where it was made to die, or before any sync), never
writes a document above the checkpoint's version, and never leaves a change the next pass would
cancel (the next sync's check finds that); a configuration change is followed by a sync that makes
the index equal the table again (`sync`'s check).
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from hypothesis import strategies as st
from hypothesis.stateful import rule
from opensearchpy import helpers
from pyiceberg.expressions import EqualTo

from icecdc.catalog import identifier_columns
from icecdc.cli import main as icecdc_main
from icecdc.lookup import field_value
from icecdc.model import EngineKind
from icecdc.state import index_stores, open_state_store
from icecdc.verify import index_documents
from tests.support.model import (
    INDEX,
    RENAMED_INDEX,
    SIDE_INDEX,
    SIDE_TABLE,
    TABLE,
    Caps,
    Identifiers,
    IndexShape,
    KnownBug,
    Look,
    Operator,
    OperatorCrash,
    Reconfig,
    StoreKind,
    Twin,
    identifier_names,
    partition_sources,
    table_documents,
)
from tests.support.model_steps import STATS, note, step

if TYPE_CHECKING:
    from tests.support.model_machine import PipelineMachine

# Another deployment's table in the same catalog, pointed at this one's index.
OTHER_TABLE = "db.other"
OTHER_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])
# The second table of this deployment (Reconfig.SIDE_TABLE): small, written by pyiceberg.
SIDE_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])

# The operator's commands' figures, for `make fuzz`'s report (by command and exit code).
OPERATOR_EXITS = (0, 1)


def versions(machine: PipelineMachine, index: str) -> dict[str, tuple[int, str]]:
    """id -> (version, source text) of every document the alias `index` serves."""
    client = machine.client
    if not client.indices.exists(index=index):
        return {}
    client.indices.refresh(index=index)
    hits = helpers.scan(client, index=index, query={"query": {"match_all": {}}, "version": True})
    return {hit["_id"]: (int(hit.get("_version", 0)), json.dumps(hit["_source"], sort_keys=True)) for hit in hits}


def run_icecdc(args: list[str]) -> tuple[int, str]:
    """`icecdc args` in this process: its exit code and what it printed (stdout and stderr)."""
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            code = icecdc_main(args)
    except SystemExit as exc:  # argparse refused the command line
        code = int(exc.code or 0)
    return code, output.getvalue()


class PeopleRules:
    """The rules of what people do to icecdc; see the module's docstring."""

    # -- the configuration -----------------------------------------------------------------------

    @rule(change=st.sampled_from(Reconfig), identifiers=st.sampled_from(Identifiers))
    @step
    def reconfigure(self: PipelineMachine, change: Reconfig, identifiers: Identifiers) -> None:
        """The operator edits icecdc's configuration; the next sync follows it."""
        settings = self.settings
        if change == Reconfig.IDENTIFIERS:
            if identifiers != settings.identifiers and KnownBug.IDENTIFIERS_CHANGED in self.excluded:
                note("reconfigure: skipped (known bug: identifier columns changed)")
                return
            else:
                settings.identifiers = identifiers
        elif change == Reconfig.MAPPING:
            settings.region_keyword = not settings.region_keyword
        elif change == Reconfig.STRINGS:
            settings.keyword_strings = not settings.keyword_strings
        elif change == Reconfig.DEAD_LETTERS:
            settings.dead_letters = not settings.dead_letters
        elif change == Reconfig.INDEX_NAME:
            if not self.rename_index():
                return
        elif change == Reconfig.SIDE_TABLE:
            note(f"reconfigure: {self.commit_side()}")
            settings.side = not settings.side
            self.side_left = None if settings.side else self.side_as_found()
        elif self.serverless is not None:  # the config refuses index settings on a collection
            note("reconfigure: skipped (a Serverless collection manages its refresh interval)")
            return
        else:
            settings.refresh = not settings.refresh
        STATS.steps[f"  reconfigured: {change}"] += 1
        note(f"reconfigure {change}: now {settings}")

    def rename_index(self: PipelineMachine) -> bool:
        """The operator renames the (first) index, or renames it back: the next sync makes the
        index under the new name equal the table; the index under the old name is left as it was
        (icecdc deletes no index of its own that the configuration stopped naming) until the
        configuration names it again, when a sync makes it equal the table. Whether it renamed."""
        if self.squatter is not None:
            note("reconfigure: the index keeps its name (someone else's index holds it until taken over)")
            return False
        old = self.settings.index
        new = RENAMED_INDEX if old == INDEX else INDEX
        self.left_behind[old] = versions(self, old)
        self.left_behind.pop(new, None)
        self.settings.index = new
        return True

    def check_left_behind(self: PipelineMachine, when: str) -> None:
        """An index the configuration no longer names is as the rename left it."""
        for name, before in self.left_behind.items():
            assert versions(self, name) == before, (
                f"{when}: icecdc changed {name}, the index's name before the configuration renamed it"
            )

    # -- a second table, listed or not ------------------------------------------------------------

    def commit_side(self: PipelineMachine) -> str:
        """Commits to the second table (made on first use): two rows appended, one updated, the
        oldest deleted when it has more than three; what was done."""
        catalog = self.lake.catalog
        if not catalog.table_exists(SIDE_TABLE):
            catalog.create_table(SIDE_TABLE, schema=SIDE_SCHEMA)
        table = catalog.load_table(SIDE_TABLE)
        ids = [self.side_next, self.side_next + 1]
        self.side_next += 2
        table.append(pa.Table.from_pylist([{"id": i, "v": f"v{i}"} for i in ids], schema=SIDE_SCHEMA))
        live = sorted(table.scan().to_arrow()["id"].to_pylist())
        if len(live) > 2:
            updated = pa.Table.from_pylist([{"id": live[-3], "v": f"updated {self.side_next}"}], schema=SIDE_SCHEMA)
            table.overwrite(updated, overwrite_filter=EqualTo("id", live[-3]))
        if len(live) > 3:
            table.delete(EqualTo("id", live[0]))
        return f"{SIDE_TABLE}: appended {ids}, {len(table.scan().to_arrow())} rows"

    def side_entry(self: PipelineMachine) -> list[dict[str, Any]]:
        """The second table's entry in the configuration, when it lists it."""
        return [{"name": SIDE_TABLE, "index": SIDE_INDEX, "identifier_columns": ["id"]}] if self.settings.side else []

    def side_as_found(self: PipelineMachine) -> tuple[Any, ...]:
        """The second table's index (documents and versions), checkpoint and pending work items."""
        config = self.config(EngineKind.IN_PROCESS, Caps.NONE, counted=False)
        store = open_state_store(config.state)
        try:
            state = (store.get_checkpoint(SIDE_TABLE), sorted(i.key for i in store.pending_items(SIDE_TABLE)))
        finally:
            store.close()
        return versions(self, SIDE_INDEX), *state

    def check_side(self: PipelineMachine, when: str, synced: bool) -> None:
        """A table the configuration does not list is left alone: its index, checkpoint and work
        items as they were when it was removed. One it lists equals its index after a clean sync
        (`synced`), its checkpoint at its current snapshot."""
        if self.side_left is not None:
            assert self.side_as_found() == self.side_left, f"{when}: a sync changed {SIDE_TABLE}, a table not listed"
            return
        if not synced or not self.settings.side:
            return
        table = self.lake.catalog.load_table(SIDE_TABLE)
        expected, _ = table_documents(self.lake, table, ("id",))
        actual = index_documents(self.client, SIDE_INDEX)
        assert actual == expected, (
            f"{when}: {SIDE_INDEX} != {SIDE_TABLE}: index {sorted(actual)[:5]}, table {sorted(expected)[:5]}"
        )
        checkpoint = self.side_as_found()[1]
        current = table.current_snapshot()
        assert checkpoint is not None and current is not None and checkpoint.snapshot_id == current.snapshot_id, (
            f"{when}: {SIDE_TABLE}'s checkpoint {checkpoint} is not at its current snapshot"
        )
        STATS.steps["  a listed second table checked"] += 1

    # -- two live rows of one key -------------------------------------------------------------------

    @rule(seed=st.integers(0, 2**16 - 1), then=st.sampled_from(Twin))
    @step
    def duplicate_key(self: PipelineMachine, seed: int, then: Twin) -> None:
        """A writer appends a row with the key of a live row, in a later snapshot (a user's
        mistake), perhaps deleting one copy in the next commit. Where icecdc checks (one unfiltered,
        unrouted index) the id's document is deleted and each row is a dead letter; a copy deleted
        leaves the other's letter open until `dead-letters replay` writes it (`check_index`)."""
        assert self.model is not None
        done = self.model.duplicate(seed, then)
        note(f"duplicate_key: {done}")
        if not done.startswith("no-op"):
            STATS.steps[f"  duplicate key: {then}"] += 1

    def configured_identifiers(self: PipelineMachine) -> list[str] | None:
        """The identifier columns the configuration names (None: the schema's)."""
        assert self.model is not None
        if self.settings.identifiers == Identifiers.KEY_AND_N:
            return [*identifier_names(self.model.key), "n"]
        if self.settings.identifiers == Identifiers.N:
            return ["n"]
        return self.model.config_identifiers()

    # -- another deployment ----------------------------------------------------------------------

    @rule()
    @step
    def second_deployment(self: PipelineMachine) -> None:
        """A second deployment (its own state) names the index of this one for another table of
        the catalog: its sync is refused in one line, exit 2, and the index is left as it was."""
        index = self.settings.index
        if not self.client.indices.exists(index=index):
            note("second_deployment: skipped (no index yet: the first to claim it owns it)")
            return
        if not self.lake.catalog.table_exists(OTHER_TABLE):
            self.lake.catalog.create_table(OTHER_TABLE, schema=OTHER_SCHEMA).append(
                pa.Table.from_pylist([{"id": 1}], schema=OTHER_SCHEMA)
            )
        raw = self.raw_config(EngineKind.IN_PROCESS, Caps.NONE, counted=False)
        raw["state"] = {"type": "sqlite", "path": str(self.workdir / "other-deployment.db")}
        raw["tables"] = [{"name": OTHER_TABLE, "index": index, "identifier_columns": ["id"]}]
        path = self.workdir / "other-deployment.json"
        path.write_text(json.dumps(raw))
        before = versions(self, index)
        code, text = run_icecdc(["sync", "--config", str(path)])
        note(f"second_deployment: exit {code}: {text[-300:]}")
        STATS.steps[f"  second deployment: exit {code}"] += 1
        assert code == 2 and index in text, f"a second deployment's sync into {index!r} was not refused: {text[-600:]}"
        assert "Traceback" not in text, text[-600:]
        assert versions(self, index) == before, f"a refused deployment changed {index!r}"

    # -- the operators' commands -----------------------------------------------------------------

    @rule(command=st.sampled_from(Operator), crash=st.sampled_from(OperatorCrash), at=st.integers(0, 1))
    @step
    def operate_icecdc(self: PipelineMachine, command: Operator, crash: OperatorCrash, at: int) -> None:
        """An operator runs one of icecdc's commands between syncs; it may die at a bulk request."""
        excluded = self.operator_excluded(command)
        if excluded:
            note(f"operate_icecdc {command}: skipped ({excluded})")
            return
        config = self.config(EngineKind.IN_PROCESS, Caps.NONE, counted=False)
        with self.stores(config) as indexes:
            checkpoints = {i.index: store.get_checkpoint(key) for i, key, store in indexes}
        before = {index: versions(self, index) for index in checkpoints}
        args = self.operator_args(command)
        if args is None:
            return
        if crash == OperatorCrash.BULK_UNSENT:
            self.proxy.drop_connection_after(at, path_contains="_bulk", forward=False)
        elif crash == OperatorCrash.BULK_APPLIED:
            self.proxy.drop_connection_after(at, path_contains="_bulk", forward=True)
        seen = len(self.proxy.seen("_bulk"))
        try:
            code, text = run_icecdc([*args, "--config", str(self.config_file())])
        finally:
            self.proxy.clear()
        died = crash != OperatorCrash.NONE and any(s.outcome.startswith("dropped") for s in self.proxy.seen("_bulk")[seen:])
        note(f"operate_icecdc {command} (crash {crash}, died: {died}): exit {code}: {text[-400:]}")
        STATS.steps[f"  operator {command}: exit {code}{' (died)' if died else ''}"] += 1
        if code not in OPERATOR_EXITS and not died and not self.refused_for_good_reason(text, checkpoints):
            raise AssertionError(f"icecdc {command} exited {code}: {text[-600:]}")
        # ids of the table's rows, whatever they hold: found, as the repair reads the checkpoint's
        # snapshot, unless the table moved since (a row written after the sync is in neither)
        current = self.lake.load().current_snapshot()
        moved = current is None or any(c is None or c.snapshot_id != current.snapshot_id for c in checkpoints.values())
        if command.names_rows and code == 0 and not moved:
            assert "not in the table nor the index" not in text, f"repair lost an id it was given: {text[-600:]}"
        if command == Operator.REPAIR_REBUILD:  # a rebuild exports the current snapshot: its checkpoint
            with self.stores(config) as indexes:
                checkpoints = {i.index: store.get_checkpoint(key) for i, key, store in indexes}
        for index, checkpoint in checkpoints.items():
            ceiling = checkpoint.sequence_number if checkpoint is not None else 0
            after = versions(self, index)
            above = {
                doc_id: version
                for doc_id, (version, source) in after.items()
                if before[index].get(doc_id) != (version, source) and version > ceiling
            }
            assert not above, (
                f"icecdc {command} wrote {len(above)} documents of {index} above the checkpoint's "
                f"version {ceiling}: {sorted(above.items())[:5]}"
            )

    @rule(command=st.sampled_from(Look))
    @step
    def look(self: PipelineMachine, command: Look) -> None:
        """`icecdc check` or `icecdc sync --dry-run` between steps: each exits with its documented
        code (check: 2 when someone else's index holds the name, else 0; a dry run: 0) and changes
        nothing: every index's documents and versions, the indices and aliases there are, the
        state's checkpoints and pending items, and whether a state file exists at all."""
        before = self.as_found()
        code, text = run_icecdc([*str(command).split(), "--config", str(self.config_file())])
        note(f"look {command}: exit {code}: {text[-300:]}")
        STATS.steps[f"  look {command}: exit {code}"] += 1
        assert "Traceback" not in text, text[-600:]
        refused = self.squatter is not None and not self.takeover
        if command == Look.CHECK:
            assert code == (2 if refused else 0), f"icecdc check exited {code}: {text[-600:]}"
        else:
            assert code == 0 or refused and code == 2, f"icecdc sync --dry-run exited {code}: {text[-600:]}"
        assert self.as_found() == before, f"icecdc {command} changed an index or the state"

    def as_found(self: PipelineMachine) -> tuple[Any, ...]:
        """Every index (documents and versions) and alias, and the state (checkpoints and
        pending items of every table), or that there is no state file yet."""
        indices = self.client.indices.get(index="*")
        layout = sorted((name, sorted(body.get("aliases", {}))) for name, body in indices.items())
        documents = {name: versions(self, name) for name in sorted(indices)}
        if self.store_kind == StoreKind.SQLITE and not self.state_path.exists():
            return layout, documents, None
        config = self.config(EngineKind.IN_PROCESS, Caps.NONE, counted=False)
        store = open_state_store(config.state)
        keys = [key for t in config.tables for _, key, _ in index_stores(t, store)]
        try:
            state = {
                key: (store.get_checkpoint(key), sorted((i.key, str(i.status)) for i in store.pending_items(key))) for key in keys
            }
        finally:
            store.close()
        return layout, documents, state

    def operator_excluded(self: PipelineMachine, command: Operator) -> str:
        """Why a command is left out of this example ("" when it runs): a known bug it triggers."""
        if command == Operator.REPLAY and KnownBug.REPLAY_BESIDE_A_COLLAPSED_RUN in self.excluded:
            return "known bug: replay beside a collapsed run"
        if command.writes and self.blocked:
            return "the index is blocked"
        if command.writes and not self.settings.dead_letters:
            return "dead letters are off: repair and replay need them for rows that cannot become documents"
        whole_rows = (
            Operator.AUDIT,
            Operator.REPLAY,
            Operator.REPAIR_FROM_AUDIT,
            Operator.REPAIR_PARTITION,
            Operator.REPAIR_IDS,
            Operator.REPAIR_KEYS,
            Operator.REPAIR_IDS_FILE,
        )
        if command in whole_rows and self.shape != IndexShape.WHOLE:
            return "audit, replay and repair of a scope compare whole rows: a shaped index is verified or rebuilt"
        if command in (Operator.VERIFY, Operator.AUDIT, Operator.REPAIR_FROM_AUDIT) and (
            KnownBug.OPERATORS_ON_BAD_ROWS in self.excluded
        ):
            return "known bug: operators' commands on dead-lettered rows"
        return ""

    def operator_args(self: PipelineMachine, command: Operator) -> list[str] | None:
        """The command line of `command` (without --config); None when it has nothing to name."""
        if command == Operator.AUDIT:
            return ["audit", "--table", TABLE, "--findings", str(self.workdir / "findings")]
        if command == Operator.VERIFY:
            return ["verify", "--table", TABLE]
        if command == Operator.REPAIR_FROM_AUDIT:
            return ["repair", "--table", TABLE, "--from-audit", "--findings", str(self.workdir / "findings")]
        if command == Operator.REPAIR_REBUILD:
            return ["repair", "--table", TABLE, "--rebuild"]
        if command == Operator.REPLAY:
            return ["dead-letters", "replay", "--table", TABLE]
        table = self.lake.load()
        if command == Operator.REPAIR_PARTITION:
            if "region" not in partition_sources(table):
                return None
            return ["repair", "--table", TABLE, "--partition", "region=eu"]
        config = self.config(EngineKind.IN_PROCESS, Caps.NONE, counted=False)
        identifiers = identifier_columns(table, config.table(TABLE))
        documents, _ = table_documents(self.lake, table, identifiers, shared={})
        ids = sorted(documents)[:2]
        if not ids:
            return None
        if command == Operator.REPAIR_KEYS:
            keys = [{c: field_value(json.loads(documents[doc_id]), c) for c in identifiers} for doc_id in ids]
            return ["repair", "--table", TABLE, *[arg for key in keys for arg in ("--key", json.dumps(key))]]
        if command == Operator.REPAIR_IDS_FILE:
            listed = self.workdir / "ids.txt"
            listed.write_text("".join(json.dumps(doc_id) + "\n" for doc_id in ids))
            return ["repair", "--table", TABLE, "--ids-file", str(listed)]
        return ["repair", "--table", TABLE, *[arg for doc_id in ids for arg in ("--id", doc_id)]]

    def refused_for_good_reason(self: PipelineMachine, text: str, checkpoints: dict[str, Any]) -> bool:
        """Whether an exit 2 is what the command must say: nothing synced yet, a sync pending, no
        audit kept for `repair --from-audit`, or someone else's index under the index's name."""
        if any(checkpoint is None for checkpoint in checkpoints.values()):
            return True
        if self.squatter is not None and "is not icecdc's" in text:  # someone else's index, as a sync finds it
            assert self.client.count(index=self.squatter)["count"] == 1, f"icecdc changed {self.squatter}"
            return True
        # "does not exist: sync": the index was deleted behind icecdc's back; the next sync exports
        said = ("sync first", "run icecdc audit first", "does not exist: sync")
        return any(s in text for s in said) or self.settings.index not in checkpoints
