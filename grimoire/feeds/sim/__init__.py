"""The built-in market simulator: a scenario YAML in, one tick's ``episode.write`` params out.

``feed`` (``SimFeed``: the simulator's state across ticks and the order of its random
draws), ``market`` (one tick of regime, price and market levels: pure), ``render`` (episode
params and their texts from numbers already drawn), ``scenario`` (the typed, validated
scenario and the shipped ones in ``scenarios/``) and ``yaml_reader`` (typed look-ups into
the parsed YAML, each error naming its key).

A package because a scenario's shape, the market model and the texts change together. May
import records and errors; nothing here reads a store or the wall clock
(the heartbeat passes the time).
"""
