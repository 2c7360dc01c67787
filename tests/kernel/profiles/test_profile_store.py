"""Finding, listing and cloning profiles: built-in vs user, no silent shadowing."""

from __future__ import annotations

import stat

import pytest

from mmo_kernel.profiles.loading import clone_profile, list_profiles, load_profile, validate_profile
from mmo_kernel.profiles.snapshots import compile_profile

BUILTIN_IDS = {
    "codex-harness-team",
    "adaptive-engineering",
    "incident-hypothesis-triage",
    "access-efficient-escalation-lab",
    "visual-engineering",
    "route-resilience-lab",
    "competing-implementations-lab",
}


def test_builtin_profiles_are_listed_with_descriptions():
    listed = {p["id"]: p for p in list_profiles()}
    assert BUILTIN_IDS <= set(listed)
    assert all(listed[i]["origin"] == "builtin" and listed[i]["description"] for i in BUILTIN_IDS)


def test_a_user_profile_loads_by_id(make_profile, mmo_env, base_toml):
    make_profile(root=mmo_env.config_dir / "profiles")
    loaded = load_profile("tiny")
    assert loaded.origin == "user" and loaded.folder == mmo_env.config_dir / "profiles" / "tiny"
    assert {"id": "tiny", "origin": "user"}.items() <= next(
        p for p in list_profiles() if p["id"] == "tiny"
    ).items()


def test_a_user_profile_folder_must_match_its_id(make_profile, mmo_env):
    make_profile(root=mmo_env.config_dir / "profiles", name="other")
    problems = validate_profile("other")
    assert problems == [
        f"{mmo_env.config_dir / 'profiles' / 'other' / 'profile.toml'}: id: "
        "'tiny' must match the folder name 'other'"
    ]


def test_a_user_profile_clashing_with_a_builtin_is_an_error(make_profile, mmo_env, base_toml):
    make_profile(
        base_toml.replace('id = "tiny"', 'id = "adaptive-engineering"'),
        root=mmo_env.config_dir / "profiles",
        name="adaptive-engineering",
    )
    with pytest.raises(
        ValueError, match="clashes with the built-in profile 'adaptive-engineering'"
    ):
        load_profile("adaptive-engineering")
    with pytest.raises(ValueError, match="clashes"):
        compile_profile("adaptive-engineering")
    clash = [
        p for p in list_profiles() if p["id"] == "adaptive-engineering" and p["origin"] == "user"
    ]
    assert "clashes" in clash[0]["error"]


def test_unknown_and_invalid_ids():
    with pytest.raises(
        FileNotFoundError, match="unknown profile 'nope'; available: .*adaptive-engineering"
    ):
        load_profile("nope")
    with pytest.raises(ValueError, match="invalid profile id"):
        load_profile("Bad Id")
    with pytest.raises(FileNotFoundError, match="no profile.toml"):
        load_profile("./not-here")


def test_clone_copies_rewrites_id_and_keeps_comments(mmo_env):
    dest = clone_profile("adaptive-engineering", "my-team")
    assert dest == mmo_env.config_dir / "profiles" / "my-team"
    text = (dest / "profile.toml").read_text()
    assert 'id = "my-team"' in text and 'adaptive-engineering"' not in text
    assert "# only the orchestrator delegates" in text
    assert (dest / "agents" / "orchestrator.md").is_file() and (
        dest / "contracts" / "engineering.json"
    ).is_file()
    assert stat.S_IMODE(dest.stat().st_mode) == 0o700
    assert validate_profile("my-team") == []
    assert compile_profile("my-team")["manifest"]["profile_id"] == "my-team"


def test_clone_of_a_user_profile_or_path(make_profile, mmo_env):
    folder = make_profile()
    dest = clone_profile(str(folder), "tiny-two")
    assert load_profile("tiny-two").profile.id == "tiny-two"
    assert clone_profile("tiny-two", "tiny-three").name == "tiny-three"
    assert (dest / "skill.md").read_text() == (folder / "skill.md").read_text()


@pytest.mark.parametrize(
    ("new_id", "phrase"),
    [
        ("Bad/Id", "invalid profile id"),
        ("", "invalid profile id"),
        ("codex-harness-team", "is a built-in profile id"),
    ],
)
def test_clone_refuses_bad_ids(new_id, phrase, mmo_env):
    with pytest.raises(ValueError, match=phrase):
        clone_profile("adaptive-engineering", new_id)
    assert not (mmo_env.config_dir / "profiles").exists() or not any(
        (mmo_env.config_dir / "profiles").iterdir()
    )


def test_clone_refuses_an_existing_destination(mmo_env):
    dest = clone_profile("adaptive-engineering", "mine")
    (dest / "agents" / "orchestrator.md").write_text("# edited\n")
    with pytest.raises(ValueError, match="already exists"):
        clone_profile("codex-harness-team", "mine")
    assert (dest / "agents" / "orchestrator.md").read_text() == "# edited\n"
    assert 'id = "mine"' in (dest / "profile.toml").read_text()
