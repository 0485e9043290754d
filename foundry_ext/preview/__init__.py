"""The LR of every batch of a run, before the run: ``plot``, ``validate``, ``law`` and ``anneal`` ask here.

* :mod:`.schedule`: a scheduler block's multiplier at any timestamp, by the cheapest exact route (this package's
  formulas without Composer, torch's engine, Composer's classes on a real ``State``); plateau cuts replayed;
* :mod:`.pipeline`: a train YAML and its overrides -> the LR of every batch (:class:`~.pipeline.LRPipeline`), in
  Composer's order (:func:`foundry_ext.config.durations.timestamp_of_batch`), on whole arrays;
* :mod:`.batch_size`: the steps of a run whose batch grows (``batch_size_schedule``): batch, tokens and LR of each;
* :mod:`.chart`: the text side of ``plot`` (the batches shown, a character chart, the plateau report);
* :mod:`.figure`: the PNG of ``plot`` (matplotlib, through :mod:`foundry_ext.figures`).

Nothing is re-exported here: import each name from its module.
"""
