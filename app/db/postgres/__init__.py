"""The PostgreSQL implementation of the storage seam and its PostgreSQL-only helpers."""
