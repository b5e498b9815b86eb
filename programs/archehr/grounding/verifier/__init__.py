"""The learned grounding verifier: training pairs (perturb, pairs), features, weights and the module (issue #37)."""
