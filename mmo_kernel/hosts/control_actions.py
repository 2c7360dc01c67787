"""The control actions of spec 04, in one place (the mesh imports this: keep it bare)."""

JOB_CONTROL_ACTIONS: tuple[str, ...] = (
    "steer", "interrupt", "pause", "continue", "detach", "stop", "compact", "finalize",
    "set_effort", "respond",
)
"""What ``control_job`` accepts (and the mesh offers as ``agent_<action>``)."""

GRANTABLE_ACTIONS: tuple[str, ...] = ("inspect", "trace", *JOB_CONTROL_ACTIONS, "fork")
"""What a profile's ``controls`` grant may name; a grant never grants cancellation."""
