"""What memtune does to the user's world, only on request: verify (run checks), apply/rollback (edit a file)."""
