"""Base classes for the drivers of MMO's five concerns.

A plugin registers driver *classes* through the registration hooks in
``hookspecs.py``; the kernel instantiates one per use. Each driver names
itself (``name``) and validates its own TOML options with a nested pydantic
``Options`` model (``extra="forbid"``), so a typo in a profile or catalog is
reported by the driver that owns the key, pointing at file and key.

Every method the kernel calls on a driver is declared here, with its types:
a driver written against these classes alone works. What a driver *needs*
from the kernel is declared too (class attributes such as
``RouteDriver.uses_codex_login`` or ``ContractTransport.enforcements``), so
the kernel never has to recognise a driver by its name.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from mmo_kernel.contracts.prompts import repair_prompt
from mmo_kernel.errors import DriverConfigError, DriverNotAvailable, format_validation_error

if TYPE_CHECKING:  # annotations only: config, tools and profiles are higher layers
    from mmo_kernel.config.catalog import Model, Route
    from mmo_kernel.tools.servers import ToolServer
    from mmo_kernel.workspace.patches import ApplyReceipt, Patch, WorkspaceHandle

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

    model_config = ConfigDict(extra="forbid", defer_build=True)


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


# ---------------------------------------------------------------- routes ---


class RouteDriver(Driver):
    """Reaches one family of model providers (spec 08).

    ``Options`` validates the driver-specific fields of a catalog route entry
    (everything except the common keys of ``catalog.Route``).
    """

    concern = "route_drivers"
    uses_codex_login: ClassVar[bool] = False
    """Codex talks to the provider with the user's own login: the session links (or
    copies) the user's ``auth.json`` into the agent's home and fails without one."""
    codex_reads_model_catalog: ClassVar[bool] = False
    """The agent's ``config.toml`` points Codex at the home's model catalog
    (``model_catalog_json``). Leave it off for models Codex knows itself: the file
    would replace Codex's bundled catalog. Every home records the catalog either way."""

    def validate_route(self, route: Route, where: str) -> None:
        """Reject a catalog route this driver cannot serve (raise DriverConfigError)."""

    def validate_model(self, model: Model, route: Route, where: str) -> None:
        """Reject a catalog model this driver cannot serve (raise DriverConfigError)."""

    def availability(self, route: Route, credentials: Mapping[str, str]) -> dict[str, Any]:
        """``{"available": bool, "reason"?: str}`` for one session's environment."""
        raise self.not_available("availability")

    def provider_config(self, route: Route, model: Model, gateway_url: str,
                        fault: str | None = None) -> dict[str, Any]:
        """The Codex ``config.toml`` keys that select this model (names of env vars only).

        ``fault`` is a typed route fault a session injects on this route (spec 03):
        the driver routes the agent so that every model call fails that way (e.g.
        ``http_headers`` from ``mmo_kernel.gateway.fault_headers``). The kernel passes
        ``fault=`` only when a fault is injected, so a driver that does not support
        faults leaves the parameter out; a session injecting a fault on its routes
        is then refused (see :meth:`takes_faults`).
        """
        raise self.not_available("provider_config")

    @classmethod
    def takes_faults(cls) -> bool:
        """Whether ``provider_config`` accepts ``fault=`` (how a driver supports faults)."""
        params = inspect.signature(cls.provider_config).parameters.values()
        return any(p.name == "fault" or p.kind is p.VAR_KEYWORD for p in params)

    def env_names(self, route: Route) -> list[str]:
        """Environment variable names an agent on this route needs."""
        return []

    def model_catalog_entry(self, route: Route, model: Model) -> dict[str, Any]:
        """The agent's model as one entry of its home's model catalog (``model_catalog_json``).

        Every home records this file and its sha256, so a resume detects a drifted
        catalog for any agent. When ``codex_reads_model_catalog`` is set the entry
        must be a complete Codex ``ModelInfo`` (a slug Codex does not know gets a
        reduced tool set, no ``apply_patch``, until it is listed); otherwise the
        default, which describes the model as the MMO catalog has it, is enough.
        """
        return {
            "slug": model.id,
            "display_name": model.display_name or model.id,
            "route": route.id,
            "upstream_id": model.upstream_id,
            "supported_reasoning_levels": list(model.reasoning_levels),
            "default_reasoning_level": model.default_reasoning,
            "context_window": model.context_window,
            "input_modalities": list(model.modalities),
        }

    def serve_responses(self, route: Route, model: Model, body: dict[str, Any],
                        env: Mapping[str, str]) -> Iterable[bytes | dict[str, Any]]:
        """Serve one ``POST /routes/<route>/v1/responses`` for the gateway.

        ``body`` is Codex's Responses request (JSON). Returns an iterable of SSE
        byte chunks (Responses streaming events), optionally interleaved with
        ``mmo_kernel.gateway.notes.LogNote`` dicts for the request log, or raises
        ``mmo_kernel.gateway.errors.GatewayError`` with the HTTP status and error
        body Codex should see. The gateway runs it in a worker thread. A driver
        may also define ``serve_responses_async`` (same arguments, an async
        iterator of the same items) that the gateway runs on its event loop: the
        fast path. The base class deliberately has no default for it.
        """
        raise self.not_available("serve_responses")


# ----------------------------------------------------------------- hosts ---


class ExecutionHost(Driver):
    """Starts, owns and recovers the process that runs an agent's turn loop (spec 03/04)."""

    concern = "execution_hosts"

    def launch_root(self, session_id: str, log_path: Path, env: dict[str, str]
                    ) -> tuple[int, str]:
        """Start the detached root controller of a session; ``(pid, start_token)``."""
        raise self.not_available("launch_root")

    def launch_job(self, job_id: str, log_path: Path, env: dict[str, str]) -> tuple[int, str]:
        """Start the detached runner of a worker job; ``(pid, start_token)``."""
        raise self.not_available("launch_job")

    def runtime_digest(self) -> str:
        """Digest of the code a host launched now runs (``runtime_current``)."""
        raise self.not_available("runtime_digest")


# ------------------------------------------------------------- contracts ---


@dataclass(frozen=True)
class TransportFit:
    """A transport's answer for one contract: can it carry it, and why (or why not).

    ``reason`` is recorded as the agent's ``contract_transport_reason``: the
    chosen transport's own reason, or the refusal of a preferred one.
    """

    carries: bool
    reason: str


class ContractTransport(Driver):
    """Makes an agent return a result that satisfies a JSON schema (spec 05).

    The kernel chooses an agent's transport when its profile is compiled:
    among the installed transports whose ``enforcements`` include the agent's
    ``contract_enforcement``, highest ``priority`` first (then by name), the
    first whose :meth:`fit` carries the schema.
    """

    concern = "contract_transports"
    enforcements: ClassVar[frozenset[str]] = frozenset()
    """The ``contract_enforcement`` values (``strict``, ``warn``) this transport serves."""
    priority: ClassVar[int] = 0
    """Preference among the transports that fit; constraining generation ranks higher."""
    repairs: ClassVar[bool] = False
    """Whether an invalid strict result gets one repair turn on the same thread."""

    def fit(self, enforcement: str, schema: dict[str, Any]) -> TransportFit:
        """Whether this transport can carry a ``enforcement`` contract with ``schema``."""
        return TransportFit(True, f"{enforcement} contract")

    def turn_overrides(self, schema: dict[str, Any], *, final: bool) -> dict[str, Any]:
        """``turn/start`` fields for a turn; ``final`` is the turn that must produce the result."""
        raise self.not_available("turn_overrides")

    def task_text(self, task: str, schema: dict[str, Any]) -> str:
        """The task as the agent receives it; a transport whose schema travels as text
        appends it here. By default the task is unchanged."""
        return task

    def repair_text(self, error: str, schema: dict[str, Any]) -> str:
        """The input of the single repair turn (``repairs`` transports), naming ``error``."""
        return repair_prompt(error)


# ------------------------------------------------------------- workspace ---


class WorkspaceIsolator(Driver):
    """Gives a writer its own workspace, captures its patch, integrates it (spec 06).

    Handles, patches and receipts are the pydantic models of
    ``mmo_kernel.workspace.patches``. ``out_of_scope``, ``check_preimage`` and
    ``reverse`` are shared by every isolator.
    """

    concern = "workspace_isolation"

    def __init__(self, options: Mapping[str, Any] | None = None,
                 where: str = "workspace isolation options") -> None:
        self.options = self.validate_options(options, where)

    def check_workspace(self, workspace: Path) -> None:
        """Refuse (``ValueError`` saying how to fix it) a workspace this isolator cannot
        serve, so a session is refused before it starts rather than at its first writer."""

    def prepare(self, workspace: Path, dest: Path, write_scope: Sequence[str],
                label: str) -> WorkspaceHandle:
        """Make the writer's private workspace under ``dest``."""
        raise self.not_available("prepare")

    def capture_patch(self, handle: WorkspaceHandle) -> Patch:
        """The writer's changes against the base."""
        raise self.not_available("capture_patch")

    def apply(self, workspace: Path, patch: Patch) -> ApplyReceipt:
        """Apply ``patch`` to the canonical workspace, keeping what reverses it."""
        raise self.not_available("apply")

    def cleanup(self, handle: WorkspaceHandle) -> None:
        """Remove the writer's private workspace (idempotent)."""
        raise self.not_available("cleanup")

    def out_of_scope(self, patch: Patch, write_scope: Sequence[str]) -> list[str]:
        """Changed paths outside ``write_scope`` (sorted)."""
        from mmo_kernel.workspace.write_scopes import paths_outside_scopes

        return paths_outside_scopes(patch.changed_paths, write_scope)

    def check_preimage(self, workspace: Path, patch: Patch) -> None:
        """Refuse (``PreimageMismatch``) when the workspace moved on since the base."""
        from mmo_kernel.workspace.patches import check_preimage

        check_preimage(workspace, patch)

    def reverse(self, workspace: Path, patch: Patch, receipt: ApplyReceipt) -> None:
        """Undo an ``apply`` exactly, or raise ``PatchReversalError`` naming the paths."""
        from mmo_kernel.workspace.patches import reverse_apply

        reverse_apply(workspace, receipt)


# ----------------------------------------------------------------- tools ---


class ToolOptIn(Protocol):
    """What a bridge reads of one ``[agents.<id>.tool_mcp_servers.<server>]`` opt-in."""

    @property
    def enabled_tools(self) -> list[str] | None:
        """The agent's subset of the server's tools; ``None``: all its enabled tools."""

    @property
    def required(self) -> bool:
        """Whether the agent must not start without this server."""

    @property
    def bridge(self) -> str:
        """The name of the bridge that serves this opt-in."""


def opt_ins_by_bridge(opt_ins: Mapping[str, ToolOptIn]) -> dict[str, dict[str, ToolOptIn]]:
    """An agent's tool-server opt-ins (server -> opt-in) grouped by the bridge each names."""
    grouped: dict[str, dict[str, ToolOptIn]] = {}
    for server, opt_in in opt_ins.items():
        grouped.setdefault(opt_in.bridge, {})[server] = opt_in
    return grouped


class ToolBridge(Driver):
    """Gives agents tools from third-party MCP servers (spec 09).

    Every tool-server opt-in of an agent (``[agents.<id>.tool_mcp_servers]``)
    names its bridge (:func:`opt_ins_by_bridge` groups them). Each call passes
    all declared servers (``tool-mcp.d``) and the agent's opt-ins that name
    *this* bridge:

    - home rendering asks every installed bridge (with possibly no opt-ins) for
      ``mcp_servers`` entries of the agent's Codex config (:meth:`render_servers`)
      and the credentials its process needs (:meth:`env_names`);
    - an execution host that gives the agent's thread run-time tools asks each
      bridge the opt-ins name for them (:meth:`dynamic_tools`, answered by
      :meth:`handle_tool_call`, ended by :meth:`close`): one bridge instance per
      agent process, built with that process's environment;
    - smoke diagnostics ask each named bridge to map run-time tool names back
      to ``server.tool`` (:meth:`alias_table`).

    A bridge serves Codex's config, or run-time tools, or both; the defaults
    contribute nothing except :meth:`env_names`. A subclass that defines its own
    ``__init__`` accepts the base's keywords (the kernel always passes them).
    """

    concern = "tool_bridges"

    def __init__(self, *, env: Mapping[str, str] | None = None,
                 stderr_dir: Path | None = None, preserve_tool_media: bool = False) -> None:
        self.env = env
        """Where credential values come from (``None``: this process's environment)."""
        self.stderr_dir = stderr_dir
        """Where a started server's stderr is kept (``None``: discarded)."""
        self.preserve_tool_media = preserve_tool_media
        """Whether the agent's route carries images and audio in tool output."""

    def render_servers(self, servers: Mapping[str, ToolServer],
                       opt_ins: Mapping[str, ToolOptIn]) -> dict[str, dict[str, Any]]:
        """``[mcp_servers]`` entries for the agent's Codex config (env var *names* only).

        An entry for a server the agent opted into through this bridge wins over
        any other bridge's entry of that name.
        """
        return {}

    def env_names(self, servers: Mapping[str, ToolServer],
                  opt_ins: Mapping[str, ToolOptIn]) -> tuple[list[str], list[str]]:
        """(stdio env var names, HTTP bearer env var names) the opted servers need.

        The agent's process environment carries exactly these credentials.
        """
        envs: set[str] = set()
        http: set[str] = set()
        for name in opt_ins:
            server = servers.get(name)
            if server is not None:
                envs.update(server.env_vars)
                http.update(server.http_env_names)
        return sorted(envs), sorted(http)

    def alias_table(self, servers: Mapping[str, ToolServer],
                    opt_ins: Mapping[str, ToolOptIn]) -> dict[str, str]:
        """Run-time tool name -> ``server.tool`` for :meth:`dynamic_tools` (starts nothing)."""
        return {}

    def dynamic_tools(self, servers: Mapping[str, ToolServer],
                      opt_ins: Mapping[str, ToolOptIn]) -> list[dict[str, Any]]:
        """``thread/start.dynamicTools`` specs (JSON) for the tools this bridge serves."""
        return []

    def handle_tool_call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one ``item/tool/call`` (JSON in, ``{"contentItems", "success"}`` out)."""
        raise self.not_available("handle_tool_call")

    def close(self) -> None:
        """Stop whatever :meth:`dynamic_tools` started (idempotent)."""


BASE_CLASSES: dict[str, type[Driver]] = {
    "route_drivers": RouteDriver,
    "execution_hosts": ExecutionHost,
    "contract_transports": ContractTransport,
    "workspace_isolation": WorkspaceIsolator,
    "tool_bridges": ToolBridge,
}
