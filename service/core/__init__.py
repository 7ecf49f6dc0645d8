"""The foundation every other part stands on: config, schema, lake, time windows, errors.

Nothing here imports from connectors/, rules/ or the rest of service/.
"""
