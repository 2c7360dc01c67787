"""``mmo ui``: a loopback web view over the read model (``mmo_kernel.views``), with
controls that act through ``mmo_kernel.api`` exactly as the CLI does. Needs ``mmo[ui]``."""
