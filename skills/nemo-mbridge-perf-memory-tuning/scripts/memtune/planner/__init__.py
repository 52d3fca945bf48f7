"""``memtune plan``: the layouts of a model on a cluster that fit in memory, best expected throughput first.

``search.plan(PlanRequest(...), kb) -> PlanResult``; see search.py for the order of work, costs.py for the
throughput model and knowledge/costs.yaml for every factor and its source.  Nothing is imported here:
``diagnose`` reads the options and costs tables of this package without loading the search, and the search,
which imports those modules, is imported from its own module (re-exporting it here made the package and its
search import each other).
"""
