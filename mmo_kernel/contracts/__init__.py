"""The contract-transport kit: everything a contract transport driver imports (spec 05).

A transport (``ContractTransport`` from :mod:`mmo_kernel.plugin`) makes an
agent return a result that satisfies the JSON schema of its output
contract. This package is its public surface:

- schemas: :func:`load_schema` (parse and check a schema file),
  :func:`resolve_contract_file` / :func:`shared_contracts_dir` (where a
  contract's file is), :func:`projection_problem` (why a schema cannot be sent
  as a strict ``outputSchema``; ``None`` when it can);
- checks: :func:`check_result` gives a :class:`ContractCheck` for an agent's
  final message;
- prompts: :func:`with_contract` (a task followed by its schema) and
  :func:`repair_prompt` (the single repair turn's input, starting with
  :data:`REPAIR_PREFIX`), for transports whose schema travels as text;
- schema instances: :func:`instance_for_schema` and
  :func:`invalid_instance_for_schema` give deterministic values a schema
  accepts or rejects (offline models and the Codex stand-in answer with
  them); :class:`SchemaInstanceError` when none exists.

Names load on first use, so importing ``contracts.schemas`` does not build
what only a check or an instance needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmo_kernel import lazy_exports

if TYPE_CHECKING:
    from mmo_kernel.contracts.check import ContractCheck, check_result
    from mmo_kernel.contracts.instance import (
        SchemaInstanceError,
        instance_for_schema,
        invalid_instance_for_schema,
    )
    from mmo_kernel.contracts.prompts import REPAIR_PREFIX, repair_prompt, with_contract
    from mmo_kernel.contracts.schemas import (
        load_schema,
        projection_problem,
        resolve_contract_file,
        shared_contracts_dir,
    )

__all__ = [
    "REPAIR_PREFIX",
    "ContractCheck",
    "SchemaInstanceError",
    "check_result",
    "instance_for_schema",
    "invalid_instance_for_schema",
    "load_schema",
    "projection_problem",
    "repair_prompt",
    "resolve_contract_file",
    "shared_contracts_dir",
    "with_contract",
]

__getattr__ = lazy_exports(__name__, {
    "mmo_kernel.contracts.check": ("ContractCheck", "check_result"),
    "mmo_kernel.contracts.instance": (
        "SchemaInstanceError", "instance_for_schema", "invalid_instance_for_schema",
    ),
    "mmo_kernel.contracts.prompts": ("REPAIR_PREFIX", "repair_prompt", "with_contract"),
    "mmo_kernel.contracts.schemas": (
        "load_schema", "projection_problem", "resolve_contract_file", "shared_contracts_dir",
    ),
})
