"""Declarative base and portable column types (jsonb/timestamptz on Postgres)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Integer, MetaData
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# jsonb on Postgres (indexable, compact), JSON text on SQLite.
JsonDoc: Any = JSON().with_variant(JSONB(), "postgresql")
# timestamptz on Postgres; SQLite stores ISO text.
Timestamp: Any = DateTime(timezone=True)
# SQLite only autoincrements INTEGER PRIMARY KEY.
BigId: Any = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
