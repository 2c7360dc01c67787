"""``mmo top`` on a terminal: a Textual app over the read model (``mmo_kernel.views``)
whose keys act through ``mmo_kernel.api`` exactly as the CLI does. Needs ``mmo[ui]``."""
