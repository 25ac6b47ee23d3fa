"""Controllers: small reconcilers that read informer caches and write through the API only."""
