"""A staged write is built from typed parts (``sagakit.store.commit_statement``): what the commit
statement needs of it (the unit of work's names left alone, every table in the unit of work's
schema, a value for each bind and no other, a guard and a returning part that are parts of the
write) is checked when it is built, not found out by PostgreSQL at the first commit; and the
statement is built once per shape."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, Text, table

from sagakit.store import Part, StagedWrite, WriteShape
from sagakit.store.commit_statement import commit_statement

COUNTERS = Table("counters", MetaData(schema="elsewhere"), Column("name", Text, primary_key=True),
                 Column("n", Integer))
AUDIT = table("audit")


def _bumped() -> Part:
    return Part("bumped", "UPDATE {counters} SET n = n + 1 WHERE name = :c_name "
                          "AND n = :c_seen RETURNING name", COUNTERS)


def _audited(source: Part) -> Part:
    return Part("audited", "INSERT INTO {audit} (name) SELECT name FROM {source} RETURNING 1",
                AUDIT, source=source)


# ---- misuse fails where the write is built, saying what is wrong

@pytest.mark.parametrize("name", ["uow_claimed", "uow_x"])
def test_a_part_may_not_take_a_name_of_the_unit_of_work(name: str) -> None:
    with pytest.raises(ValueError, match="names starting 'uow_' are the unit of work's"):
        Part(name, "UPDATE {counters} SET n = 0 RETURNING 1", COUNTERS)


def test_a_part_may_not_bind_a_value_of_the_unit_of_work() -> None:
    with pytest.raises(ValueError, match=r"part 'bumped': value 'uow_saga_id': names starting"):
        Part("bumped", "UPDATE {counters} SET n = 0 WHERE name = :uow_saga_id RETURNING 1",
             COUNTERS)


@pytest.mark.parametrize("name", ["Bumped", "bumped-row", "1st", ""])
def test_a_part_is_named_as_sql_names_a_cte(name: str) -> None:
    with pytest.raises(ValueError, match="is not a lower-case SQL identifier"):
        Part(name, "SELECT 1")


def test_a_table_named_in_the_sql_is_given_as_a_table() -> None:
    # The old convention, a schema the SQL names by itself, is refused: the unit of work
    # writes the table in its schema.
    with pytest.raises(ValueError, match=r"names \['schema'\] in its SQL but is given no table"):
        Part("bumped", "UPDATE {schema}.counters SET n = 0 RETURNING 1")


def test_a_table_given_is_named_in_the_sql() -> None:
    with pytest.raises(ValueError, match=r"is given \['audit'\], which its SQL does not name"):
        Part("bumped", "UPDATE {counters} SET n = 0 RETURNING 1", COUNTERS, AUDIT)


def test_two_uses_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two uses named 'counters'"):
        Part("bumped", "UPDATE {counters} SET n = 0 RETURNING 1", COUNTERS, counters=AUDIT)


def test_a_stray_brace_is_refused_with_the_part_named() -> None:
    with pytest.raises(ValueError, match=r"part 'bumped'.*a literal brace is written twice"):
        Part("bumped", "UPDATE {counters} SET n = '{' RETURNING 1", COUNTERS)


def test_a_guard_that_is_no_part_of_the_write_is_refused() -> None:
    with pytest.raises(ValueError, match=r"guard Part\('bumped'\) is not a part of this write"):
        WriteShape(Part("audited", "INSERT INTO {audit} (name) VALUES ('a') RETURNING 1", AUDIT),
                   guard=_bumped())


def test_a_returning_part_that_is_no_part_of_the_write_is_refused() -> None:
    bumped = _bumped()
    with pytest.raises(ValueError, match=r"returning Part\('audited'\) is not a part of this"):
        WriteShape(bumped, returning=_audited(bumped))


def test_a_part_reads_only_earlier_parts_of_its_write() -> None:
    bumped = _bumped()
    with pytest.raises(ValueError, match="uses part 'bumped', which is not an earlier part"):
        WriteShape(_audited(bumped), bumped)


def test_two_parts_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two parts named 'bumped'"):
        WriteShape(_bumped(), _bumped())


def test_a_write_has_a_part() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        WriteShape()


def test_a_bind_without_a_value_is_refused() -> None:
    bumped = _bumped()
    shape = WriteShape(bumped, guard=bumped)
    with pytest.raises(ValueError, match=r"WriteShape\(bumped\): no value for \['c_seen'\]"):
        StagedWrite(shape, {"c_name": "a"})


def test_a_value_no_part_binds_is_refused() -> None:
    bumped = _bumped()
    shape = WriteShape(bumped, guard=bumped)
    with pytest.raises(ValueError, match=r"values no part binds: \['c_sen'\]"):
        StagedWrite(shape, {"c_name": "a", "c_seen": 1, "c_sen": 1})


# ---- what a well-built write renders

def test_tables_are_written_in_the_unit_of_works_schema_and_parts_by_name() -> None:
    bumped = _bumped()
    audited = _audited(bumped)
    assert bumped.render("scratch_1") == ('UPDATE "scratch_1".counters SET n = n + 1 '
                                          "WHERE name = :c_name AND n = :c_seen RETURNING name")
    assert audited.render("svc") == ('INSERT INTO "svc".audit (name) SELECT name FROM bumped '
                                     "RETURNING 1")


def test_the_binds_are_those_sqlalchemy_binds_and_casts_are_not_binds() -> None:
    part = Part("held", "SELECT CAST(:n AS int), (:m)::int, '12:30'::time, x::text FROM {counters}",
                COUNTERS)
    assert part.binds == {"n", "m"}
    assert WriteShape(part, _audited(part)).binds == {"n", "m"}


def test_the_statement_is_built_once_per_shape_even_if_the_shape_is_built_again() -> None:
    first_part, second_part = _bumped(), _bumped()
    first = WriteShape(first_part, guard=first_part)
    second = WriteShape(second_part, guard=second_part)
    assert first == second and hash(first) == hash(second)
    statement = commit_statement("svc", True, True, first, True)
    assert commit_statement("svc", True, True, second, True) is statement
    assert commit_statement("svc", True, True, WriteShape(first_part), True) is not statement
    assert "bumped AS (\nUPDATE \"svc\".counters" in statement.text
    assert "SELECT (SELECT count(*) FROM bumped) AS uow_held" in statement.text


def test_a_staged_write_names_its_guard_and_returning_part_to_the_statement() -> None:
    bumped = _bumped()
    audited = _audited(bumped)
    write = StagedWrite(WriteShape(bumped, audited, guard=bumped, returning=audited),
                        {"c_name": "a", "c_seen": 1})
    sql = commit_statement("svc", False, False, write.shape, False).text
    assert "SELECT (SELECT count(*) FROM bumped) AS uow_held, uow_r.*" in sql
    assert "(SELECT true AS uow_present, * FROM audited) AS uow_r" in sql
