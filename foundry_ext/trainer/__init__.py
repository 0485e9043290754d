"""What runs inside Composer's Trainer: the schedulers llm-foundry builds and this package's callbacks.

:mod:`.schedulers` (one ComposerScheduler per schedule model, generated), :mod:`.composer_schedulers` (Composer's own
schedules with validated keys), :mod:`.torch_lr` (any torch scheduler), :mod:`.plateau` (the plateau scheduler and
its callback), :mod:`.resume_check` and :mod:`.checkpoint_guard`. Importing a module here imports Composer.
"""
