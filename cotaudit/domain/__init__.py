"""The domain both halves speak: problems, premises, proof steps, canonical propositions, the
premise sentences that express them, and the procedural tasks' answers."""
