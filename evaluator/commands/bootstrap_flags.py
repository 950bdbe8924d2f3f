"""The argparse types of the bootstrap options every evaluator command takes (``--n-boot``,
``--seed``): checked where they are typed (exit 2, the flag named), so that a typo fails at
once instead of as a traceback from numpy or after minutes of resampling."""

from __future__ import annotations

from cotaudit.flags import integer_flag

# Far above what any interval needs (the default is 10,000); it bounds what a typo costs
# before a single resample is drawn.
MAX_N_BOOT = 10_000_000

n_boot_flag = integer_flag(
    low=0,
    high=MAX_N_BOOT,
    fix="give the number of bootstrap resamples (0: no intervals), e.g. --n-boot 10000",
)
seed_flag = integer_flag(low=0, fix="give e.g. --seed 0")

__all__ = ["MAX_N_BOOT", "n_boot_flag", "seed_flag"]
