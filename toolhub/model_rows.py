"""A model instance read by one plain statement, for the reads every request makes (agents.access.api_keys: an API
request's key and the key's user), where building a queryset, raw or compiled, cost more than the query.

`fetch_one(model, where, params)` selects the model's concrete columns, converts each value as a queryset does (the
backend's converters, then the field's: an SQLite timestamp becomes an aware datetime, a JSON column its value) and
returns `Model.from_db(...)`: the instance a queryset would give, every field loaded. The statement's text and the
columns are worked out once per model and database; the converters are asked of the connection in use, since
they belong to it.
"""

import functools

from django.db import DEFAULT_DB_ALIAS, connections


@functools.cache
def _statement(model, alias: str):
    """(SELECT ... FROM ... WHERE, the fields' attnames, their columns as expressions) of `model` on `alias`."""
    quote = connections[alias].ops.quote_name
    meta = model._meta
    fields = meta.concrete_fields
    select = f"SELECT {', '.join(quote(field.column) for field in fields)} FROM {quote(meta.db_table)} WHERE "
    return select, [field.attname for field in fields], [field.get_col(meta.db_table) for field in fields]


def fetch_one(model, where: str, params, *, using: str = DEFAULT_DB_ALIAS):
    """The first row of `model` matching `where` (SQL after WHERE, with %s placeholders for `params`), or None."""
    select, names, columns = _statement(model, using)
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(select + where, params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, column in enumerate(columns):
        for convert in connection.ops.get_db_converters(column) + column.get_db_converters(connection):
            values[index] = convert(values[index], column, connection)
    return model.from_db(using, names, values)
