"""Finding, validating, listing and cloning team profiles (spec 02).

Built-in profiles ship in the ``mmo_profiles`` package; user profiles live in
``<config dir>/profiles/<id>/``. A user profile whose id is also a built-in
one is an error rather than a silent override, so a profile id always means
one thing. Any function taking ``profile`` accepts an id or a path to a
profile folder (a path contains a ``/``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import tomlkit
from pydantic import ValidationError

from mmo_kernel.config.catalog import Catalog
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.config.toml_input import (
    DocumentError,
    problem,
    read_toml,
    schema_version_problem,
    validation_problems,
)
from mmo_kernel.profiles.checks import check_profile
from mmo_kernel.profiles.schema import PROFILE_ID_RE, ProfileDoc
from mmo_kernel.state import paths

PROFILE_FILE = "profile.toml"
Origin = Literal["builtin", "user", "path"]


@dataclass(frozen=True)
class ProfileLocation:
    """Where a profile was found and what kind of profile it is."""

    folder: Path
    origin: Origin

    @property
    def file(self) -> Path:
        return self.folder / PROFILE_FILE


@dataclass(frozen=True)
class LoadedProfile:
    """A profile that passed every check: the document and the folder it came from."""

    profile: ProfileDoc
    folder: Path
    origin: Origin


def builtin_profiles_dir() -> Path:
    return Path(str(resources.files("mmo_profiles")))


def user_profiles_dir() -> Path:
    return paths.config_dir() / "profiles"


def _ids_in(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if (p / PROFILE_FILE).is_file())


def builtin_profile_ids() -> list[str]:
    return _ids_in(builtin_profiles_dir())


def _is_path(profile: str | os.PathLike[str]) -> bool:
    return not isinstance(profile, str) or "/" in profile or profile.startswith(".")


def _check_id(profile_id: str) -> None:
    if not isinstance(profile_id, str) or not PROFILE_ID_RE.match(profile_id):
        raise ValueError(
            f"invalid profile id {profile_id!r}: use lower case letters, digits, '-' or '_' "
            "(at most 64 characters)"
        )


def locate_profile(profile: str | os.PathLike[str]) -> ProfileLocation:
    """Resolve an id or a folder path; an id clash between built-in and user is an error."""
    if _is_path(profile):
        folder = Path(profile).expanduser()
        if folder.name == PROFILE_FILE and folder.is_file():
            folder = folder.parent
        if not (folder / PROFILE_FILE).is_file():
            raise FileNotFoundError(f"no {PROFILE_FILE} in {folder}")
        return ProfileLocation(folder.resolve(), "path")
    profile_id = str(profile)
    _check_id(profile_id)
    builtin = builtin_profiles_dir() / profile_id
    user = user_profiles_dir() / profile_id
    if (builtin / PROFILE_FILE).is_file():
        if user.exists():
            raise ValueError(
                f"user profile {user} clashes with the built-in profile {profile_id!r}; "
                f"rename the user profile's folder and id (built-ins are never shadowed)"
            )
        return ProfileLocation(builtin, "builtin")
    if (user / PROFILE_FILE).is_file():
        return ProfileLocation(user, "user")
    known = ", ".join(builtin_profile_ids() + _ids_in(user_profiles_dir()))
    raise FileNotFoundError(f"unknown profile {profile_id!r}; available: {known}")


def parse_profile(location: ProfileLocation) -> ProfileDoc:
    """Read and schema-validate ``profile.toml``; raises ``DocumentError`` with all problems."""
    file = location.file
    data = read_toml(file)
    found = schema_version_problem(data, file, "profile")
    if found:
        raise DocumentError([found])
    try:
        doc = ProfileDoc.model_validate(data)
    except ValidationError as exc:
        raise DocumentError(validation_problems(exc, file)) from None
    if location.origin != "path" and doc.id != location.folder.name:
        raise DocumentError(
            [problem(file, "id", f"{doc.id!r} must match the folder name {location.folder.name!r}")]
        )
    return doc


def _problems(
    location: ProfileLocation, catalog: Catalog | None
) -> tuple[ProfileDoc | None, list[str]]:
    try:
        doc = parse_profile(location)
        catalog = catalog if catalog is not None else load_catalog(isolate_fragments=True)
    except DocumentError as exc:
        return None, exc.problems
    return doc, check_profile(doc, location.folder, location.file, catalog)


def validate_profile(profile: str | os.PathLike[str]) -> list[str]:
    """Every problem as ``<file>: <key>: <message>``; empty when the profile is valid."""
    return _problems(locate_profile(profile), None)[1]


def load_profile(profile: str | os.PathLike[str], catalog: Catalog | None = None) -> LoadedProfile:
    """The validated profile; ``ValueError`` (``DocumentError``) listing all problems otherwise."""
    location = locate_profile(profile)
    doc, problems = _problems(location, catalog)
    if problems or doc is None:
        raise DocumentError(problems)
    return LoadedProfile(doc, location.folder, location.origin)


def _description(folder: Path) -> tuple[str, str | None]:
    try:
        with open(folder / PROFILE_FILE, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return "", f"unreadable {PROFILE_FILE}: {exc}"
    value = data.get("description", "")
    return (value if isinstance(value, str) else ""), None


def list_profiles() -> list[dict[str, str]]:
    """Built-in and user profiles by id: ``{"id", "origin", "path", "description"[, "error"]}``."""
    out = []
    builtin_ids = set(builtin_profile_ids())
    for origin, directory in (("builtin", builtin_profiles_dir()), ("user", user_profiles_dir())):
        for pid in _ids_in(directory):
            folder = directory / pid
            description, error = _description(folder)
            entry = {"id": pid, "origin": origin, "path": str(folder), "description": description}
            if origin == "user" and pid in builtin_ids:
                error = f"clashes with the built-in profile {pid!r}; rename it"
            if error:
                entry["error"] = error
            out.append(entry)
    return sorted(out, key=lambda e: (e["id"], e["origin"]))


def _ignore(_directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n in ("__pycache__", ".DS_Store") or n.endswith(".pyc")]


def clone_profile(source_id: str | os.PathLike[str], new_id: str) -> Path:
    """Copy a profile into ``<config dir>/profiles/<new_id>``; ``id`` rewritten, comments kept."""
    _check_id(new_id)
    if new_id in builtin_profile_ids():
        raise ValueError(f"{new_id!r} is a built-in profile id; choose another id")
    source = locate_profile(source_id)
    dest_root = paths.ensure_private_dir(user_profiles_dir())
    dest = dest_root / new_id
    if dest.exists():
        raise ValueError(f"cannot clone into {dest}: it already exists")
    try:
        document = tomlkit.parse(source.file.read_text(encoding="utf-8"))
    except tomlkit.exceptions.ParseError as exc:
        raise DocumentError([problem(source.file, "(document)", f"invalid TOML: {exc}")]) from None
    document["id"] = new_id
    staging = Path(tempfile.mkdtemp(prefix=f".{new_id}.", dir=dest_root))
    try:
        shutil.copytree(source.folder, staging / "profile", ignore=_ignore)
        for path in [staging / "profile", *(staging / "profile").rglob("*")]:
            os.chmod(path, 0o700 if path.is_dir() else 0o600)
        (staging / "profile" / PROFILE_FILE).write_text(tomlkit.dumps(document), encoding="utf-8")
        os.rename(staging / "profile", dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest
