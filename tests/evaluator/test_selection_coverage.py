"""Coverage of the delta-method interval on the simulated rule/shortcut mixture.

Each of 200 simulations draws 150 traces: a problem drawn uniformly (with replacement) from a
balanced pool, answered by a simulated deployment (the real model the local server serves)
with its own ``seed``, so a problem drawn twice is two independent traces. Traces are then
i.i.d. from the pool's (family, stratum) mix - the sampling model of the interval - and the
95% interval of each simulation's Delta must cover the closed-form Delta of that mix 92-98%
of the time.
"""

from __future__ import annotations

import numpy as np
import pytest

from cotaudit.domain.procedural_answers import extract_procedural_answer
from evaluator.selection import JointCounts, deployment_stats
from runner.server.deployments import DeploymentParams, SimulatedDeployment, closed_form, mix_of
from runner.tasks.procedural.task import ProceduralTask

SIMULATIONS = 200
TRACES = 150


@pytest.mark.slow
def test_delta_interval_covers_the_closed_form_92_to_98_percent() -> None:
    pool = list(ProceduralTask(per_stratum=8, max_stratum=5).problems())
    params = DeploymentParams(p_r=0.55, eps=0.05, q=0.7, qd=0.85)
    model = SimulatedDeployment(params.model_name(), params)
    truth = closed_form(params, mix_of(pool)).delta
    covered = 0
    for seed in range(SIMULATIONS):
        cells = [0, 0, 0, 0]
        rng = np.random.default_rng(seed)
        for j, i in enumerate(rng.integers(0, len(pool), size=TRACES)):
            p = pool[i]
            answers = []
            for variant in (p.original, p.intervened):
                text = model.complete(
                    [{"role": "user", "content": variant.prompt}], {"seed": seed * TRACES + j}
                )
                found = extract_procedural_answer(text.text, p.family)
                assert found.ok
                answers.append(found.value == variant.answer)
            correct, followed = answers
            cells[(0 if followed else 1) + (0 if correct else 2)] += 1
        stats = deployment_stats(JointCounts(*cells))
        assert stats.delta_ci is not None
        covered += stats.delta_ci[0] <= truth <= stats.delta_ci[1]
    assert 0.92 <= covered / SIMULATIONS <= 0.98, covered
