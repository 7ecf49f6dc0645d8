"""`spendlake serve`: the HTTP app, the metrics collector and its families, the scheduler."""
