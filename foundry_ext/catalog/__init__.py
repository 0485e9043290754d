"""The names this package knows, and what is built on them; pure Python, neither torch nor Composer.

``scheduler.name`` and callback name -> config model (:mod:`.registry`, :mod:`.callbacks`), the pre-flight check of
a train YAML (:mod:`.preflight`, which asks :mod:`.callback_checks`, :mod:`.monitor`, :mod:`.fsdp` and
:mod:`.batch_size` and gathers their :mod:`.findings`; :mod:`.train_config` checks the rest of the YAML's keys), its
JSON Schema (:mod:`.schema`) and the key tables of the docs (:mod:`.docs`).
"""
