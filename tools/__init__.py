"""The command-line tools (thin mains) and the packages only they use."""
