"""The simulated reasoners' logic, split by idea.

- :mod:`.reading`: what a reasoner reads from a prompt (premises, question), memoised.
- :mod:`.chain`: forward chaining over canonical propositions, and the steps it yields with
  the premises each truly used.
- :mod:`.phrasing`: the chain of thought written from those steps, in varied wording.
- :mod:`.chance`: stable pseudo-random draws keyed by strings (no global RNG state).

:mod:`runner.server.reasoners` combines them into the served models.
"""
