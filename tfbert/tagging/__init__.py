"""Token classification (named-entity recognition): CoNLL data, features, metrics, runs, export."""
