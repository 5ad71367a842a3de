"""File I/O layer of the attnlimits workflow: dumps, model folders, corpus download, atomic writes.

Kept apart from :mod:`attnlimits`, whose functions stay pure. Rule scripts in workflow/scripts
are thin adapters that call into these two packages.
"""
