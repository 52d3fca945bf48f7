"""``memtune compare A B``: regression analysis of two configs, two training logs or two memory snapshots.

Each module is pure (inputs already read, the knowledge base passed in) and returns dataclasses that
render/compare.py lays out: detect.py tells the kind of an input, configs.py attributes the estimated
difference to each changed setting, logs.py lines up per-step memory reports, snapshots.py replays two
allocation timelines.
"""
