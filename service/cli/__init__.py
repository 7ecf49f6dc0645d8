"""The command line: the click group (errors become exit codes there), one module per command family."""
