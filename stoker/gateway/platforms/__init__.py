"""Chat platforms on the gateway: one adapter per platform behind one interface
(`base.Adapter`), one bridge (`bridge.Bridge`) from updates to the session service.

Adding a platform is a module here implementing `Adapter`, its settings section, and
its line in `registry.build_bridges`.
"""
