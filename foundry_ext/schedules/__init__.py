"""Typed schedule configs: one pydantic model per ``scheduler.name``, with the formula where it is this package's.

Composer-free and torch-free: ``foundry-ext validate``, ``schema`` and ``schedulers`` use them without importing
either. The ComposerSchedulers that llm-foundry builds are generated from them in
:mod:`foundry_ext.trainer.schedulers`; the names are listed in :mod:`foundry_ext.catalog.registry`.
"""
