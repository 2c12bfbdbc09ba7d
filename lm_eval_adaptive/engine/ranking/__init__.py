"""Several models ranked: the ranker, the allocation of items among models, and the pair judgement (ranking/pairs/)."""
