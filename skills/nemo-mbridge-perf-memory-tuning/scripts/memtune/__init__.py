"""memtune: diagnose and fix GPU out-of-memory failures in Megatron Bridge training."""

__version__ = "0.2.0"
