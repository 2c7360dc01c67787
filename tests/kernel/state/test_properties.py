"""Round-trip properties of the credentials parser and the JSONL log."""

import os
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmo_kernel.config.credentials import parse_credentials
from mmo_kernel.state.audit import append_jsonl, read_jsonl

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
# Printable values without surrounding spaces; quotes only inside.
VALUES = st.text(alphabet=string.printable.strip(string.whitespace[1:]) + "é€", min_size=1,
                 max_size=40).map(str.strip).filter(
    lambda v: v and v[0] not in "'\"" and v[-1] not in "'\"")
ONE_SETTING = dict(max_examples=25, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(**ONE_SETTING)
@given(pairs=st.dictionaries(NAMES, VALUES, max_size=6), quote=st.sampled_from(["", "'", '"']),
       export=st.booleans())
def test_written_credentials_read_back_exactly(mmo_env, pairs, quote, export):
    prefix = "export " if export else ""
    lines = [f"{prefix}{k}={quote}{v}{quote}" for k, v in pairs.items()
             if quote not in v or not quote]
    path = mmo_env.config_dir / "credentials.env"
    path.write_text("# generated\n" + "\n".join(lines) + "\n", encoding="utf-8")
    os.chmod(path, 0o600)
    expected = {k: v for k, v in pairs.items() if quote not in v or not quote}
    assert parse_credentials() == expected


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                  max_size=3),
    max_leaves=10,
)


@settings(**ONE_SETTING)
@given(objects=st.lists(st.dictionaries(st.text(max_size=8), JSON, max_size=4), max_size=4))
def test_jsonl_round_trips_any_objects_one_per_line(tmp_path, objects):
    log = tmp_path / f"log-{os.urandom(4).hex()}.jsonl"
    for obj in objects:
        append_jsonl(log, obj)
    assert read_jsonl(log, strict=True) == objects
    if objects:
        assert log.read_bytes().count(b"\n") == len(objects)
