"""The daily report: gather the numbers, model them as sections, render HTML/CSV/JSON/Markdown."""
