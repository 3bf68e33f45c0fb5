"""Terms written for how the database plans a query, not for what it returns.

* :func:`constant`: a value the query is written for, in its SQL text. PostgreSQL plans a prepared
  statement once for any parameters after a few runs when that plan's estimated cost is about that
  of the plans made for the values (a generic plan), and psycopg prepares every statement at its
  fifth use on a connection. A kind or a state bound as a parameter is unknown to that plan: the read
  of an operation by its key (``OperationRepository.latest_by_key``) named its six kinds as
  parameters, and the generic plan PostgreSQL settled on read every entry of the principal in the
  unique index (tenant, principal, kind, key), kind being no key of the scan (5.6x the time of a
  custom plan at 100,000 imports, 13x at 200,000; ``bench/history.py``,
  ``tests/store/test_history_plans.py``). Named as one ``IN`` list it still did, so that read is
  one lookup per kind.
* :class:`filter_only`: a column as a filter SQLite does not turn into an index key.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BindParameter, ColumnElement, literal
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["constant", "filter_only"]


def constant(value: str) -> BindParameter[str]:
    """``value`` rendered into the statement's text (SQLAlchemy's ``literal_execute``), so every plan
    knows it, a generic one too. Only for the kit's own vocabulary (kinds, states), never for input."""
    return literal(value, literal_execute=True)


class filter_only(FunctionElement[Any]):
    """A column as a filter the query planner does not turn into an index key.

    SQLite plans without statistics (the kit never runs ``ANALYZE``) and takes an equality on an
    indexed column for a selective one: ``status IN ('failed', 'succeeded')`` walked every finished
    operation through the status index and sorted them, instead of reading the last minutes through
    ``ix_operations_updated`` (101x at 200,000 imports, bench/history.py). SQLite's unary ``+``
    keeps a term out of index selection and changes no value; PostgreSQL, which plans from
    statistics, gets the column as it is.
    """

    name = "filter_only"
    inherit_cache = True

    def __init__(self, column: ColumnElement[Any] | InstrumentedAttribute[Any]) -> None:
        super().__init__(column)
        self.type = column.type  # values compared with it are bound as the column's own


@compiles(filter_only)
def _filter_only(element: filter_only, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)


@compiles(filter_only, "sqlite")
def _filter_only_sqlite(element: filter_only, compiler: SQLCompiler, **kw: Any) -> str:
    return "+" + compiler.process(element.clauses, **kw)
