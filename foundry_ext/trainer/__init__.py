"""What runs inside Composer's Trainer: the schedulers llm-foundry builds and this package's callbacks.

:mod:`.schedulers` (one ComposerScheduler per schedule model, generated), :mod:`.composer_schedulers` (Composer's own
schedules with validated keys), :mod:`.torch_lr` and :mod:`.torch_engine` (any torch scheduler), :mod:`.plateau` (the
plateau scheduler and its callback), :mod:`.resume_check` (the schedule checked on resume), :mod:`.checkpoint_guard`
(kill anywhere and resume), :mod:`.spike_guard` (skip a spiking step, stop or roll back a burst), :mod:`.batch_size`
(batch-size warmup: its loader and callback), :mod:`.lr_lambdas` (which ``LambdaLR`` runs which scheduler) and
:mod:`.node_signal_files` (one signal file per node). Importing a module here imports Composer.
"""
