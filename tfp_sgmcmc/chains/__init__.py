"""Long runs of a kernel: compiled runs with progress and constant-memory
moments (`runs`), resumable chains and their files (`checkpointing`), run
health (`diagnostics`), step-size schedules (`schedules`), ArviZ output
(`inference_data`), the silencing of TFP's expected calibration warning
(`quiet`) and the warm-up that tunes a kernel before sampling
(`warmup`, with what it picks by default in `warmup_picks`)."""

from tfp_sgmcmc.chains import checkpointing
from tfp_sgmcmc.chains import diagnostics
from tfp_sgmcmc.chains import inference_data
from tfp_sgmcmc.chains import quiet
from tfp_sgmcmc.chains import runs
from tfp_sgmcmc.chains import schedules
from tfp_sgmcmc.chains import warmup
from tfp_sgmcmc.chains import warmup_picks
from tfp_sgmcmc.chains.checkpointing import (StepSeeded, StepSeededResults,
                                             load_chain, save_chain)
from tfp_sgmcmc.chains.diagnostics import UnhealthyChainWarning, summarize
from tfp_sgmcmc.chains.inference_data import to_inference_data
from tfp_sgmcmc.chains.runs import (ChainRun, Moments,
                                    sample_chain_with_progress,
                                    sample_moments)
from tfp_sgmcmc.chains.schedules import (CyclicalSchedule, PolynomialDecay,
                                         step_size_weighted_mean)
from tfp_sgmcmc.chains.warmup import (WarmupReport, WarmupResult, warm_up,
                                      warmup_windows)

__all__ = [
    "StepSeeded", "StepSeededResults", "save_chain", "load_chain",
    "summarize", "UnhealthyChainWarning", "sample_moments", "Moments",
    "sample_chain_with_progress", "ChainRun", "PolynomialDecay",
    "CyclicalSchedule", "step_size_weighted_mean", "to_inference_data",
    "warm_up", "WarmupResult", "WarmupReport", "warmup_windows",
]
