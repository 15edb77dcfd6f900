"""Values and bytes: what is sent to providers and what comes back. Imports only `errors`."""
