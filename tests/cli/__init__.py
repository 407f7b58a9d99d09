"""The command line: options, output, exit codes."""
