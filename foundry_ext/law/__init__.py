"""Loss laws across LR schedules: fit on past runs, predict any schedule's loss curve, tune a cooldown.

``multipower`` (Luo et al. 2025) and ``tissue`` (Tissue et al. 2024) are the laws as numpy functions; ``runs`` reads
CSV and MLflow runs into traces; ``fit`` fits a law; ``lawfile`` reads and writes ``LAW.json``. numpy and scipy only:
no torch, no Composer.
"""
