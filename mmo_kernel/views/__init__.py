"""The live view's read model: what ``mmo top`` and ``mmo ui`` show, kept up to date cheaply.

One ``Collector`` per viewer process reads the state dir without writing to it:
records are re-parsed only when their file identity (mtime_ns, size, inode)
changes, event logs and audit logs are tailed from the last offset (a refresh
reads only the bytes appended since the last one), and the gateway's request
log is folded into per-route figures over a sliding window. Past sessions are
counted, not opened again, once they are terminal and unchanged.
"""
