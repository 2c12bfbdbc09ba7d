"""How a pair of models is judged: its outcome on the metric's scale, its cost to settle, when to stop buying, rank ranges."""
