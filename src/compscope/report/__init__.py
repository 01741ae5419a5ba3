"""What compscope shows: figures (plots). Only the command line imports this package."""
