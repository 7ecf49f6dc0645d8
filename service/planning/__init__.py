"""Planning: what a pretraining run will cost (estimate, GPU table) and the registered plans."""
