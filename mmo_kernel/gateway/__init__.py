"""The local model gateway: one loopback HTTP server shared by every session (spec 08).

Public entry points: :func:`ensure_gateway`, :func:`gateway_status`,
:func:`stop_gateway`, :func:`gateway_models`, :func:`route_telemetry`, and
:func:`fault_headers` for sessions that inject route faults.
"""

from __future__ import annotations

from mmo_kernel.gateway.faults import FAULT_HEADER, ROUTE_FAULTS, fault_headers
from mmo_kernel.gateway.listing import gateway_models
from mmo_kernel.gateway.process import ensure_gateway, gateway_status, stop_gateway
from mmo_kernel.gateway.telemetry import route_telemetry

__all__ = ["FAULT_HEADER", "ROUTE_FAULTS", "ensure_gateway", "fault_headers", "gateway_models",
           "gateway_status", "route_telemetry", "stop_gateway"]
