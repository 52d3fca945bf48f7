"""One module per CLI subcommand (see memtune.cli)."""
