"""Every setting Odradek reads, by Kafka's name where Kafka has one, defined once.

- :mod:`.definition`: a setting's definition (type, default, range, description,
  readers) and :class:`~.definition.Catalog`;
- :mod:`.topic`: topic configs; :mod:`.broker`: cluster-wide broker configs the
  controller publishes;
- :mod:`.gateway`, :mod:`.storage`, :mod:`.controller`, :mod:`.coordinator`,
  :mod:`.offsets`: each service's own settings (its start-up defaults);
- :mod:`.index`: all catalogs, in the order ``docs/configuration.md`` lists them.
"""
