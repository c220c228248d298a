"""Where a capped pass's rows are: the marks it leaves on its items, and the indexes read back."""

from __future__ import annotations

from icecdc.model import ItemKind, ItemStatus, WorkItem
from icecdc.sync.indexes import AppliedMark, applied_indexes, applied_mark


def applied(mark: str, path: str) -> WorkItem:
    return WorkItem(
        "db.t", "t-uuid", ItemKind.EXPORT, 1, 1, 0, 2, (path,),
        status=ItemStatus.APPLIED, applied_to=mark,
    )  # fmt: skip


def test_a_mark_names_the_index_the_schema_and_the_identifier_columns() -> None:
    marks = {applied_mark("u", 0, ("k",)), applied_mark("u", 1, ("k",))}
    marks |= {applied_mark("u", 0, ("n",)), applied_mark("u", 0, ())}
    assert len(marks) == 4 and all(m.startswith("u@") for m in marks)


def test_an_index_written_with_ids_of_other_columns_is_not_one_to_go_on_in() -> None:
    items = [applied(applied_mark("by-k", 0, ("k",)), "a"), applied(applied_mark("by-n", 0, ("n",)), "b")]
    assert applied_indexes(items) == {"by-k", "by-n"}  # the table's indexes, whatever the ids
    assert applied_indexes(items, ("n",)) == {"by-n"}
    assert applied_indexes(items, ()) == frozenset()


def test_a_mark_that_records_no_identifier_columns_counts_for_any() -> None:
    older = [applied("old@schema-0", "a")]  # as passes marked items before they recorded them
    assert applied_indexes(older, ("n",)) == {"old"}


def test_a_mark_reads_back_as_written_and_marks_written_before_read_with_the_parts_they_hold() -> None:
    mark = AppliedMark.of("u", 3, ("k", "n"))
    assert AppliedMark.parse(str(mark)) == mark and str(mark) == applied_mark("u", 3, ("k", "n"))
    assert AppliedMark.parse("u@schema-3") == AppliedMark("u", "schema-3")
    assert AppliedMark.parse("u") == AppliedMark("u") and str(AppliedMark("u")) == "u"
    assert mark.has_ids_of(("k", "n")) and not mark.has_ids_of(("n", "k"))
    assert AppliedMark("u", "schema-3").has_ids_of(("n",))
