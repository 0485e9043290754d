"""Loss laws across LR schedules: fit on past runs, predict any schedule's loss curve, tune a cooldown.

* ``multipower`` (Luo et al. 2025) and ``tissue`` (Tissue et al. 2024): the laws as numpy functions;
  ``forms``: one record per law (parameter names, ranges, starting points, units), read by everything below;
* ``trace``: a run as the law sees it; ``runs``: CSV and MLflow runs read into traces;
* ``fit``: a law fitted to runs; ``reliability``: leave-one-run-out checks, bands and the verdict; ``lawfile``:
  ``LAW.json`` read and written;
* ``predict``: the loss after any batch of an LR trace, and a train YAML's LR through the LR pipeline
  (:mod:`foundry_ext.preview.pipeline`, imported when a YAML is predicted); ``tune``: a grid or cooldown branches
  ranked; ``figure``: the prediction's PNG (matplotlib through :mod:`foundry_ext.figures`).

No torch and no Composer, except what the LR pipeline imports for a YAML whose schedule is Composer's.
"""
