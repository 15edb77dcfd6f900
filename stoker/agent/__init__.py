"""The agent (configuration), its sessions, the turn loop, and forks."""
