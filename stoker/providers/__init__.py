"""Providers: the `Provider` protocol, the embedded simulator, and real SDK transports."""
