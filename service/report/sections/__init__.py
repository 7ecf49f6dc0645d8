"""The report's sections, one module per family of numbers."""
