"""`SamplingCallback` and what it runs inside `model.fit`: the optimizer
phases (burn-in, sampling), the epoch logs, the health check, the energies
of AMAGOLD's M-H test, backups beside `BackupAndRestore`, and `fit` across
worker processes."""
