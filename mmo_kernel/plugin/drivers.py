"""Base classes for the drivers of MMO's five concerns.

A plugin registers driver *classes* through the registration hooks in
``hookspecs.py``; the kernel instantiates one per use. Each driver names
itself (``name``) and validates its own TOML options with a nested pydantic
``Options`` model (``extra="forbid"``), so a typo in a profile or catalog is
reported by the driver that owns the key, pointing at file and key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from mmo_kernel.errors import DriverConfigError, DriverNotAvailable

CONCERNS: tuple[str, ...] = (
    "route_drivers",
    "execution_hosts",
    "contract_transports",
    "workspace_isolation",
    "tool_bridges",
)
"""The five extension concerns, in the order ``mmo plugins`` lists them."""


class NoOptions(BaseModel):
    """Options model of a driver that takes no TOML options."""

    model_config = ConfigDict(extra="forbid")


def format_validation_error(exc: ValidationError) -> str:
    """One readable line per pydantic error: ``key.path: message``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(document)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class Driver:
    """Common behaviour of every driver: a name, a concern and option validation."""

    name: ClassVar[str]
    concern: ClassVar[str]
    Options: ClassVar[type[BaseModel]] = NoOptions

    @classmethod
    def validate_options(cls, options: Mapping[str, Any] | None, where: str) -> BaseModel:
        """Validate this driver's TOML options; ``where`` is ``file: key`` for errors."""
        try:
            return cls.Options.model_validate(dict(options or {}))
        except ValidationError as exc:
            raise DriverConfigError(where, format_validation_error(exc)) from None

    @classmethod
    def not_available(cls, operation: str) -> DriverNotAvailable:
        """The error a driver raises for behaviour this version does not have yet."""
        return DriverNotAvailable(cls.concern, cls.name, operation)


class RouteDriver(Driver):
    """Reaches one family of model providers (spec 08).

    ``Options`` validates the driver-specific fields of a catalog route entry
    (everything except the common keys of ``catalog.Route``).
    """

    concern = "route_drivers"

    def validate_route(self, route: Any, where: str) -> None:
        """Reject a catalog route this driver cannot serve (raise DriverConfigError)."""

    def validate_model(self, model: Any, route: Any, where: str) -> None:
        """Reject a catalog model this driver cannot serve (raise DriverConfigError)."""

    def availability(self, route: Any, credentials: Mapping[str, str]) -> dict[str, Any]:
        """``{"available": bool, "reason"?: str}`` for one session's environment."""
        raise self.not_available("availability")

    def provider_config(self, route: Any, model: Any, gateway_url: str,
                        fault: str | None = None) -> dict[str, Any]:
        """The Codex ``config.toml`` keys that select this model (names of env vars only).

        ``fault`` is a typed route fault injected for this session (spec 03); the
        driver routes the agent so that every model call fails that way.
        """
        raise self.not_available("provider_config")

    def env_names(self, route: Any) -> list[str]:
        """Environment variable names an agent on this route needs."""
        return []

    def model_catalog_entry(self, route: Any, model: Any) -> dict[str, Any] | None:
        """Codex's ``ModelInfo`` for ``model`` (written to the home's ``model_catalog_json``).

        A slug Codex does not know gets a reduced tool set (no ``apply_patch``);
        listing it in the catalog restores it. ``None`` means Codex knows the
        model itself (no catalog is written for it).
        """
        return None

    def serve_responses(
        self, route: Any, model: Any, body: dict[str, Any], env: Mapping[str, str]
    ) -> Any:
        """Serve one ``POST /routes/<route>/v1/responses`` for the gateway.

        Returns an iterator of SSE byte chunks (Responses streaming events) or
        raises ``mmo_kernel.gateway.errors.GatewayError`` with the HTTP status
        and error body Codex should see. The gateway runs it in a worker thread.
        A driver may also define ``serve_responses_async`` (same arguments, an
        async iterator of chunks) that the gateway runs on its event loop: the
        fast path. The base class deliberately has no default for it.
        """
        raise self.not_available("serve_responses")


class ExecutionHost(Driver):
    """Starts, owns and recovers the process that runs an agent's turn loop (spec 03/04)."""

    concern = "execution_hosts"

    def launch_root(self, session_id: str, log_path: Any, env: dict[str, str]) -> tuple[int, str]:
        """Start the detached root controller of a session; ``(pid, start_token)``."""
        raise self.not_available("launch_root")

    def launch_job(self, job_id: str, log_path: Any, env: dict[str, str]) -> tuple[int, str]:
        """Start the detached runner of a worker job; ``(pid, start_token)``."""
        raise self.not_available("launch_job")

    def runtime_digest(self) -> str:
        """Digest of the code a host launched now runs (``runtime_current``)."""
        raise self.not_available("runtime_digest")


class ContractTransport(Driver):
    """Makes an agent return a result that satisfies a JSON schema (spec 05)."""

    concern = "contract_transports"
    repairs: ClassVar[bool] = False
    """Whether an invalid strict result gets one repair turn on the same thread."""

    def turn_overrides(self, schema: dict[str, Any], *, final: bool) -> dict[str, Any]:
        """``turn/start`` fields for a turn; ``final`` is the turn that must produce the result."""
        raise self.not_available("turn_overrides")


class WorkspaceIsolator(Driver):
    """Gives a writer its own workspace, captures its patch, integrates it (spec 06).

    Paths are ``pathlib.Path``; handles, patches and receipts are the
    pydantic models of ``mmo_kernel.workspace.patches``. ``out_of_scope``,
    ``check_preimage`` and ``reverse`` are shared by every isolator.
    """

    concern = "workspace_isolation"

    def __init__(self, options: Mapping[str, Any] | None = None,
                 where: str = "workspace isolation options") -> None:
        self.options = self.validate_options(options, where)

    def prepare(self, workspace: Any, dest: Any, write_scope: list[str], label: str) -> Any:
        """Make the writer's private workspace under ``dest``; returns a ``WorkspaceHandle``."""
        raise self.not_available("prepare")

    def capture_patch(self, handle: Any) -> Any:
        """The writer's changes against the base, as a ``Patch``."""
        raise self.not_available("capture_patch")

    def apply(self, workspace: Any, patch: Any) -> Any:
        """Apply ``patch`` to the canonical workspace; returns an ``ApplyReceipt``."""
        raise self.not_available("apply")

    def cleanup(self, handle: Any) -> None:
        """Remove the writer's private workspace (idempotent)."""
        raise self.not_available("cleanup")

    def out_of_scope(self, patch: Any, write_scope: list[str]) -> list[str]:
        """Changed paths outside ``write_scope`` (sorted)."""
        from mmo_kernel.workspace.write_scopes import paths_outside_scopes

        return paths_outside_scopes(patch.changed_paths, write_scope)

    def check_preimage(self, workspace: Any, patch: Any) -> None:
        """Refuse (``PreimageMismatch``) when the workspace moved on since the base."""
        from mmo_kernel.workspace.patches import check_preimage

        check_preimage(workspace, patch)

    def reverse(self, workspace: Any, patch: Any, receipt: Any) -> None:
        """Undo an ``apply`` exactly, or raise ``PatchReversalError`` naming the paths."""
        from mmo_kernel.workspace.patches import reverse_apply

        reverse_apply(workspace, receipt)


class ToolBridge(Driver):
    """Gives agents tools from third-party MCP servers (spec 09)."""

    concern = "tool_bridges"


BASE_CLASSES: dict[str, type[Driver]] = {
    "route_drivers": RouteDriver,
    "execution_hosts": ExecutionHost,
    "contract_transports": ContractTransport,
    "workspace_isolation": WorkspaceIsolator,
    "tool_bridges": ToolBridge,
}
