"""Input readers: each turns one kind of evidence (log, config, env, snapshot, question) into facts.

Readers know nothing about causes or fixes; recognition patterns come from knowledge/.
Nothing is imported here so that reading one input never loads the others.
"""
