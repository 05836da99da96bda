"""The alignment harness: proves that two training set-ups give the same loss curve."""
