"""icecdc.verdict: what becomes of a table's index, one row per rebuild reason the history fixed.

A table `uuid-1` at schema 0 whose configured identifier columns are `("id",)`; the checkpoint is
at snapshot 3 (sequence number 3) with what a pass records (schema, identifier columns). Each row
names the commit that fixed the case, where there was one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from icecdc.model import NO_SNAPSHOT, Checkpoint, ResyncKind
from icecdc.verdict import (
    Copy,
    DestinationFacts,
    ExportFacts,
    Fate,
    IndexFacts,
    IndexFound,
    TableFacts,
    Verdict,
    copy_to_write,
    empty_verdict,
    files_gone_verdict,
    first_export_verdict,
    index_verdict,
    pass_verdict,
    replaced,
    reshaped,
    table_verdict,
    tidies,
    unfinished,
)

UUID = "uuid-1"
AT_3 = Checkpoint(UUID, 3, 3, schema_id=0, identifier_columns=("id",))
FOLLOWING = TableFacts(UUID, 0, ("id",), AT_3, known_sequence_number=5, current_sequence_number=5)


def end(snapshot_id: int, sequence_number: int, uuid: str = UUID) -> Checkpoint:
    """A pass end the store recorded (`StateStore.pass_end`)."""
    return Checkpoint(uuid, snapshot_id, sequence_number)


def case(fate: Fate, reason: str, why: str, **facts: object) -> object:
    """A row: FOLLOWING with `facts` changed, the fate and the reason's words expected."""
    return pytest.param(replace(FOLLOWING, **facts), fate, reason, id=why)  # type: ignore[arg-type]


GONE = {"checkpoint_ancestor": False, "checkpoint_exists": False}  # the checkpoint expired
OFF = {"pass_end_on_lineage": False}  # the recorded pass end is off the current lineage


@pytest.mark.parametrize(
    ("facts", "fate", "reason"),
    [
        case(Fate.FOLLOW, "", "first export", checkpoint=None),
        case(Fate.FOLLOW, "", "caught up or behind"),
        case(Fate.RESET, "again (UUID uuid-1 → uuid-2)", "table re-created", table_uuid="uuid-2"),
        case(
            Fate.RESET,
            "identifier columns changed (none → ['id'])",
            "identifier columns none to some (8a1ae54)",
            checkpoint=replace(AT_3, identifier_columns=()),
        ),
        case(
            Fate.RESET,
            "identifier columns changed (['id'] → ['id', 'region'])",
            "identifier columns some to other",
            identifiers=("id", "region"),
        ),
        case(Fate.RESET, "(['id'] → none)", "identifier columns some to none", identifiers=()),
        case(Fate.FOLLOW, "", "identifiers not recorded", checkpoint=Checkpoint(UUID, 3, 3)),
        case(
            Fate.RESET,
            "an unfinished pass wrote through snapshot 4, rolled back since",
            "dead pass's commits rolled back (a72625d)",
            pass_end=end(4, 4),
            **OFF,
        ),
        case(Fate.FOLLOW, "", "dead pass's commits still current", pass_end=end(4, 4)),
        case(Fate.FOLLOW, "", "pass end at the checkpoint (cc646f6)", pass_end=end(3, 3), **OFF),
        case(Fate.FOLLOW, "", "pass end newer than the view", pass_end=end(9, 9), **OFF),
        case(Fate.FOLLOW, "", "pass end of the old table", pass_end=end(4, 4, "uuid-0"), **OFF),
        case(Fate.RESET, "3 is not an ancestor", "table rolled back", checkpoint_ancestor=False),
        case(Fate.REWRITE, "checkpoint snapshot 3 was expired", "checkpoint expired", **GONE),
        case(Fate.RESET, "not an ancestor", "expired, behind", current_sequence_number=2, **GONE),
        case(
            Fate.RESET,
            "an unfinished pass wrote through snapshot 4",
            "unfinished rewrite rolled back behind an expired checkpoint (dc7d0a4)",
            pass_end=end(4, 4),
            **GONE,
            **OFF,
        ),
        case(Fate.REWRITE, "the schema changed (schema 0 → 1)", "schema changed", schema_id=1),
    ],
)
def test_table_verdict(facts: TableFacts, fate: Fate, reason: str) -> None:
    decided = table_verdict(facts)
    assert decided.fate == fate
    assert reason in decided.reason and bool(decided.reason) == bool(reason)


REFUSED = "index 'orders' is not this table's: a user's index"
OTHER_DEPLOYMENT = "index 'orders' is db.customers's index (catalog other)"
SWAP = "the alias 'orders' was not swapped to the rebuilt generation 'orders-2'"
RESHAPED = "index 'orders' holds another shape of the table (every column and row → abc)"


@pytest.mark.parametrize(
    ("facts", "synced", "expected"),
    [
        pytest.param(IndexFacts(), True, Verdict(), id="nothing to do"),
        pytest.param(
            IndexFacts(refused=REFUSED, unfinished=SWAP),
            False,
            Verdict(Fate.REFUSE, REFUSED),
            id="someone else's index (b840074)",
        ),
        pytest.param(
            IndexFacts(refused=OTHER_DEPLOYMENT),
            True,
            Verdict(Fate.REFUSE, OTHER_DEPLOYMENT),
            id="another deployment's index (b840074)",
        ),
        pytest.param(
            IndexFacts(unfinished=SWAP, reshaped=RESHAPED),
            True,
            Verdict(Fate.UNFINISHED, SWAP),
            id="a rebuild's swap not made (4142fca)",
        ),
        pytest.param(
            IndexFacts(reshaped=RESHAPED),
            True,
            Verdict(Fate.RESET, RESHAPED, Copy.NEW),
            id="reshaped index is work for has_work and status (d7ea9c8)",
        ),
        pytest.param(IndexFacts(reshaped=RESHAPED), False, Verdict(), id="reshaped, never synced"),
    ],
)
def test_index_verdict(facts: IndexFacts, synced: bool, expected: Verdict) -> None:
    assert index_verdict(facts, synced) == expected


REPLACED = "index 'orders' was replaced by another index (uuid a → b)"
UNACCOUNTED = "index 'orders' holds 3 documents no checkpoint of the table accounts for"


@pytest.mark.parametrize(
    ("facts", "synced", "expected", "tidy"),
    [
        pytest.param(IndexFacts(), True, Verdict(), True, id="follow, leftovers deleted"),
        pytest.param(
            IndexFacts(replaced=REPLACED, reshaped=RESHAPED),
            True,
            Verdict(Fate.RESET, REPLACED, Copy.NEW),
            False,
            id="index deleted or replaced: exported into a new generation (ed1c9d3, fuzz 2026-11-28)",
        ),
        pytest.param(
            IndexFacts(unaccounted=UNACCOUNTED),
            False,
            Verdict(Fate.NEW_GENERATION, UNACCOUNTED, Copy.NEW),
            False,
            id="documents no checkpoint accounts for (c9d84db)",
        ),
        pytest.param(
            IndexFacts(reshaped=RESHAPED),
            True,
            Verdict(Fate.RESET, RESHAPED, Copy.NEW),
            False,
            id="configured shape changed (f8a1eb2)",
        ),
        pytest.param(
            IndexFacts(reshaped=RESHAPED, rebuilding=True),
            True,
            Verdict(),
            False,
            id="reshape while a rebuild is pending (424301f)",
        ),
    ],
)
def test_pass_verdict(facts: IndexFacts, synced: bool, expected: Verdict, tidy: bool) -> None:
    decided = pass_verdict(facts, synced)
    assert decided == expected
    # planned, a rebuild is under way: the pass deletes no generation
    rebuilding = facts.rebuilding or bool(decided.fate.resync)
    assert tidies(decided, rebuilding) == tidy


EMPTY = Checkpoint(UUID, NO_SNAPSHOT, 0, schema_id=0)


@pytest.mark.parametrize(
    ("checkpoint", "rebuild", "expected"),
    [
        pytest.param(None, "", Verdict(), id="never synced, index empty"),
        pytest.param(EMPTY, "", Verdict(), id="empty and caught up"),
        pytest.param(
            replace(EMPTY, table_uuid="uuid-0"),
            "",
            Verdict(Fate.RESET, "created again, empty", Copy.NEW),
            id="table created again empty (22208b3)",
        ),
        pytest.param(
            AT_3,
            "",
            Verdict(Fate.RESET, "created again, empty", Copy.NEW),
            id="checkpoint at a snapshot the empty table no longer has",
        ),
        pytest.param(
            EMPTY,
            RESHAPED,
            Verdict(Fate.RESET, RESHAPED, Copy.NEW),
            id="empty table's index reshaped (fa10d55, 2435e69)",
        ),
        pytest.param(
            None,
            UNACCOUNTED,
            Verdict(Fate.RESET, UNACCOUNTED, Copy.NEW),
            id="empty table, index holding documents none accounts for",
        ),
    ],
)
def test_empty_verdict(checkpoint: Checkpoint | None, rebuild: str, expected: Verdict) -> None:
    assert empty_verdict(UUID, checkpoint, rebuild) == expected


REWRITE, RESET = frozenset({ResyncKind.REWRITE}), frozenset({ResyncKind.RESET})


@pytest.mark.parametrize(
    ("facts", "copy"),
    [
        pytest.param(DestinationFacts(), Copy.ALIAS, id="changes into the alias"),
        pytest.param(DestinationFacts(REWRITE), Copy.ALIAS, id="rewrite in place"),
        pytest.param(
            DestinationFacts(REWRITE, takes_rewrite=False),
            Copy.NEW,
            id="rewrite the index cannot take: type or shape changed (33dd354, 424301f)",
        ),
        pytest.param(DestinationFacts(RESET), Copy.NEW, id="reset (0d76e51)"),
        pytest.param(DestinationFacts(RESET, resumable=True), Copy.RESUME, id="reset resumed"),
        pytest.param(DestinationFacts(export_anew=True), Copy.NEW, id="export anew"),
        pytest.param(
            DestinationFacts(REWRITE, takes_rewrite=False, resumable=True),
            Copy.RESUME,
            id="rewrite into a generation resumed",
        ),
        pytest.param(
            DestinationFacts(REWRITE, versions=False),
            Copy.NEW,
            id="rewrite where no version tells older documents (Serverless)",
        ),
    ],
)
def test_copy_to_write(facts: DestinationFacts, copy: Copy) -> None:
    assert copy_to_write(facts) == copy


@pytest.mark.parametrize(
    ("facts", "fate"),
    [
        pytest.param(ExportFacts(), Fate.FOLLOW, id="a first export"),
        pytest.param(ExportFacts(abandoned=frozenset({7})), Fate.RESET, id="over an abandoned export"),
        pytest.param(ExportFacts(planned=True, abandoned=frozenset({7})), Fate.FOLLOW, id="planned as an export"),
        pytest.param(ExportFacts(planned=True, planned_reset=True), Fate.RESET, id="planned as a reset: goes on"),
    ],
)
def test_first_export_verdict(facts: ExportFacts, fate: Fate) -> None:
    assert first_export_verdict(facts).fate == fate


def test_files_gone_rewrite_unless_the_table_lost_them() -> None:
    assert files_gone_verdict("gone", listed_now=False) == Verdict(Fate.REWRITE, "gone")
    assert files_gone_verdict("gone", listed_now=True) is None


def test_fates_plan_the_resync_kinds_planning_writes() -> None:
    assert Fate.REWRITE.resync == ResyncKind.REWRITE and Fate.RESET.resync == ResyncKind.RESET
    assert {f.resync for f in Fate if f not in (Fate.REWRITE, Fate.RESET)} == {ResyncKind.NONE}


SHAPED = "abc"  # a configured shape's fingerprint


@pytest.mark.parametrize(
    ("current", "recorded", "shape", "reason"),
    [
        pytest.param(None, "", SHAPED, "", id="no index yet"),
        pytest.param("orders-1", SHAPED, SHAPED, "", id="the configured shape"),
        pytest.param("orders", "", "", "", id="pre-alias index, every column and row"),
        pytest.param(
            "orders",
            "",
            SHAPED,
            "index 'orders' holds another shape of the table (every column and row → abc)",
            id="pre-alias index, a shape configured (2b36533)",
        ),
        pytest.param(
            "orders-1",
            SHAPED,
            "",
            "index 'orders' holds another shape of the table (abc → every column and row)",
            id="shape configured away (f8a1eb2)",
        ),
    ],
)
def test_reshaped(current: str | None, recorded: str, shape: str, reason: str) -> None:
    assert reshaped("orders", current, recorded, shape) == reason


@pytest.mark.parametrize(
    ("index", "reason"),
    [
        pytest.param(IndexFound("u1"), "", id="as the checkpoint left it"),
        pytest.param(
            IndexFound("u0", ("orders-2",)),
            "the alias 'orders' was not swapped to the rebuilt generation 'orders-2'",
            id="a rebuild stopped before its swap (4142fca)",
        ),
        pytest.param(IndexFound(None), "index 'orders' was deleted", id="deleted (72241f4)"),
        pytest.param(IndexFound("u2"), "index 'orders' was replaced by another index", id="new"),
        pytest.param(
            IndexFound("u1", (), ("orders-1",)),
            "generations orders-1 of index 'orders' are left over",
            id="a swap's old generation left over",
        ),
    ],
)
def test_unfinished(index: IndexFound, reason: str) -> None:
    assert unfinished("orders", "u1", index) == reason


@pytest.mark.parametrize(
    ("found", "reason"),
    [
        pytest.param("u1", "", id="the checkpoint's index"),
        pytest.param(None, "index 'orders' was deleted", id="deleted (ed1c9d3)"),
        pytest.param(
            "u2",
            "index 'orders' was replaced by another index (uuid u1 → u2)",
            id="deleted and created again",
        ),
    ],
)
def test_replaced(found: str | None, reason: str) -> None:
    assert replaced("orders", "u1", found) == reason
