"""What only the SQLite storage needs (its implementations are the shared ones)."""
