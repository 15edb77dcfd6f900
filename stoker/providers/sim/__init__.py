"""The embedded simulated provider: a deterministic model plus the providers' exact cache
accounting, so everything runs with no key and no network and every cache number is real."""
