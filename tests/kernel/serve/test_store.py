"""The server's account store: users, tokens, scopes, revocation and persistence (spec 12,
"Accounts, tokens and scopes")."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from mmo_kernel.serve.store import (
    AlreadyExists,
    ServerStore,
    StoreError,
    UnknownScope,
    UnknownToken,
    UnknownUser,
)


@pytest.fixture(autouse=True)
def _isolated(mmo_env):
    yield


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "serve"


def test_admin_token_is_created_once_0600_and_kept(state: Path) -> None:
    first = ServerStore(state)
    token = (state / "admin-token").read_text(encoding="utf-8")
    assert first.admin_token_created
    assert token.startswith("mmo_adm_") and token.endswith("\n") and token.count("\n") == 1
    assert stat.S_IMODE((state / "admin-token").stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700

    os.chmod(state / "admin-token", 0o644)
    second = ServerStore(state)
    assert not second.admin_token_created
    assert (state / "admin-token").read_text(encoding="utf-8") == token
    assert stat.S_IMODE((state / "admin-token").stat().st_mode) == 0o600
    admin = second.authenticate_bearer(token.strip())
    assert admin is not None and admin.is_admin and admin.username is None


def test_a_foreign_admin_token_file_is_refused_naming_it(state: Path) -> None:
    state.mkdir(mode=0o700)
    (state / "admin-token").write_text("not-a-token\n", encoding="utf-8")
    with pytest.raises(ValueError, match="admin-token: not an MMO admin token"):
        ServerStore(state)


def test_usernames_follow_the_pattern(state: Path) -> None:
    store = ServerStore(state)
    for good in ("a", "alice", "a.b_c-d", "0" + "x" * 63):
        assert store.create_user(good)["username"] == good
    for bad in ("", "Alice", "-a", ".a", "a b", "a/b", "x" * 65, "é"):
        with pytest.raises(StoreError, match="invalid username"):
            store.create_user(bad)
    with pytest.raises(AlreadyExists):
        store.create_user("alice")


def test_pats_authenticate_as_their_user_with_their_scopes(state: Path) -> None:
    store = ServerStore(state)
    store.create_user("alice")
    issued = store.create_token("alice", "laptop", ["write", "read", "read"])
    assert issued["token"].startswith("mmo_pat_")
    assert issued["scopes"] == ["read", "write"]
    principal = store.authenticate_bearer(issued["token"])
    assert principal is not None
    assert (principal.username, principal.scopes, principal.is_admin) == (
        "alice", frozenset({"read", "write"}), False)
    assert not principal.may_administer
    admin_pat = store.create_token("alice", "ops", ["admin"])["token"]
    assert store.authenticate_bearer(admin_pat).may_administer
    assert store.authenticate_bearer(issued["token"] + "x") is None
    assert store.authenticate_bearer("mmo_pat_" + "A" * 43) is None
    assert store.authenticate_bearer("") is None and store.authenticate_bearer(None) is None


def test_unknown_scope_and_unknown_user_are_refused(state: Path) -> None:
    store = ServerStore(state)
    store.create_user("alice")
    with pytest.raises(UnknownScope, match="unknown scope 'root'") as info:
        store.create_token("alice", "t", ["read", "root"])
    assert info.value.phrase == "unknown scope"
    with pytest.raises(UnknownUser):
        store.create_token("bob", "t", ["read"])
    with pytest.raises(UnknownUser):
        store.create_runner_token("bob", "laptop", "t")
    assert store.tokens() == []


def test_runner_tokens_are_bound_to_user_and_client_id(state: Path) -> None:
    store = ServerStore(state)
    store.create_user("alice")
    store.create_user("bob")
    issued = store.create_runner_token("alice", "laptop", "home")
    assert issued["token"].startswith("mmo_rt_") and issued["client_id"] == "laptop"
    grant = store.authenticate_runner(issued["token"])
    assert (grant.username, grant.client_id, grant.token_id) == ("alice", "laptop",
                                                                 issued["token_id"])
    # a runner token is no bearer for /mcp or the API, and a PAT is no runner token
    assert store.authenticate_bearer(issued["token"]) is None
    pat = store.create_token("alice", "t", ["read"])["token"]
    assert store.authenticate_runner(pat) is None
    with pytest.raises(AlreadyExists, match="client_id 'laptop'"):
        store.create_runner_token("bob", "laptop", "stolen")
    assert store.create_runner_token("alice", "laptop", "rotated")["client_id"] == "laptop"
    with pytest.raises(StoreError, match="invalid client_id"):
        store.create_runner_token("alice", "Laptop.1", "t")
    assert store.runner_client_ids("alice") == {"laptop"}


def test_revoke_takes_effect_on_the_next_check_even_from_another_store(state: Path) -> None:
    serving = ServerStore(state)
    serving.create_user("alice")
    pat = serving.create_token("alice", "t", ["read"])
    runner = serving.create_runner_token("alice", "laptop", "t")
    assert serving.authenticate_bearer(pat["token"]) is not None
    revoked: list[str] = []
    serving.on_revoke(revoked.append)

    serving.revoke_token(pat["token_id"])
    assert serving.authenticate_bearer(pat["token"]) is None
    assert revoked == [pat["token_id"]]

    other = ServerStore(state)  # another process writing the same state dir
    other.revoke_token(runner["token_id"])
    assert serving.authenticate_runner(runner["token"]) is None
    assert not serving.token_live(runner["token_id"])
    serving.revoke_token(pat["token_id"])  # twice is fine
    with pytest.raises(UnknownToken):
        serving.revoke_token("tok_0000000000000000")


def test_tokens_are_stored_only_as_sha256(state: Path) -> None:
    store = ServerStore(state)
    store.create_user("alice")
    pat = store.create_token("alice", "t", ["read", "admin"])["token"]
    runner = store.create_runner_token("alice", "laptop", "t")["token"]
    admin = (state / "admin-token").read_text(encoding="utf-8").strip()
    for path in state.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert pat.encode() not in data and runner.encode() not in data, path
            if path.name != "admin-token":
                assert admin.encode() not in data, path
    accounts = json.loads((state / "accounts.json").read_text(encoding="utf-8"))
    digests = {r["sha256"] for r in accounts["tokens"].values()}
    assert digests == {hashlib.sha256(t.encode()).hexdigest() for t in (pat, runner)}
    assert stat.S_IMODE((state / "accounts.json").stat().st_mode) == 0o600
    assert all("sha256" not in t for t in store.tokens())


def test_users_tokens_and_runners_survive_a_new_store(state: Path) -> None:
    first = ServerStore(state)
    first.create_user("alice")
    pat = first.create_token("alice", "t", ["read"])["token"]
    runner = first.create_runner_token("alice", "laptop", "t")["token"]
    first.record_hello("laptop", "alice", [{"id": "code", "name": "code", "description": "",
                                             "vcs": "git"}], ["mmo_pjob_1"])
    again = ServerStore(state)
    assert again.user_exists("alice")
    assert again.authenticate_bearer(pat).username == "alice"
    assert again.authenticate_runner(runner).client_id == "laptop"
    entry = again.runner_registry()["laptop"]
    assert entry["owner"] == "alice" and entry["projects"][0]["id"] == "code"
    assert entry["live_job_ids"] == ["mmo_pjob_1"] and entry["last_seen_at"]
    again.record_projects("laptop", [])
    assert ServerStore(state).runner_registry()["laptop"]["projects"] == []
