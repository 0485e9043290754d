"""``reduce_lr_on_plateau`` in Composer: a stateless scheduler and the callback (adapter) that holds its state.

The two are one mechanism: the scheduler holds the configuration and multiplies the schedule by the scale; the
callback owns the plateau state, reads the monitored metric and decides the cuts with
:class:`~foundry_ext.schedules.plateau_rule.PlateauRule` (torch's arithmetic, no torch). The scheduler attaches the
callback to the Trainer at its first call, and the callback binds to its scheduler. One module per job:

* :mod:`.scheduler`: :class:`~.scheduler.ReduceLROnPlateauScheduler` (the YAML's ``scheduler.name``);
* :mod:`.callback`: :class:`~.callback.ReduceLROnPlateauCallback`, its events and the decision (Composer keys its
  checkpoint state by the class ``__qualname__``: never rename it);
* :mod:`.broadcast`: rank 0's monitored value on every rank;
* :mod:`.group_lrs`: one ``LambdaLR`` function per param group, and a cut applied to the next batch's LR;
* :mod:`.report`: the cut's line and the ``lr_plateau/*`` metrics;
* :mod:`.resume`: the settings saved with the state, and a resumed run's changes of them;
* :mod:`.base`: the ``base`` schedule block, built through llm-foundry's registry.
"""
