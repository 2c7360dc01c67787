"""`mmo accept project-tools` (spec 12 "Acceptance"): the ten cases against a disposable
loopback server and runner."""
