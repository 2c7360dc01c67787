"""The two projects the acceptance cases work on, and the bytes the cases expect.

``data`` is a plain folder holding every input; ``code`` is a git repository whose
``calc.py`` is broken and whose ``test_calc.py`` is the validation. Expected outputs are
computed here, independently of the scripts the cases send, so a case compares bytes.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import zlib
from pathlib import Path

FIVE_LINES = "one\ntwo\nthree\nfour\nfive\n"
NOTE = "Remember: the acceptance note travels unchanged.\n"
CONFLICTING_NOTE = "An unrelated note that was already in sorted/.\n"
STALE_TEXT = "alpha\nbeta\n"
EXTERNAL_LINE = "external line\n"
SMALL_TEXT = "a small receipt for the recorder session\n"
EAST_CSV = "city,amount\nZürich,12\nÅrhus,7\n"
WEST_CSV = "city,amount\nŁódź,5\n東京,30\n"
MERGED_CSV = "city,amount,source\nZürich,12,east\nÅrhus,7,east\nŁódź,5,west\n東京,30,west\n"
CSV_REPORT = "rows: 4\ntotal amount: 54\nsources: east=2 west=2\n"
LARGE_BYTES = 10 * 1024 * 1024 + 1
BROKEN_CALC = '"""A tiny calculator the acceptance run repairs."""\n\n\ndef add(a, b):\n' \
              '    return a - b\n'
TEST_CALC = ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n"
             'if __name__ == "__main__":\n    unittest.main()\n')
GIT_ENV = {"GIT_AUTHOR_NAME": "MMO Acceptance", "GIT_AUTHOR_EMAIL": "accept@localhost",
           "GIT_COMMITTER_NAME": "MMO Acceptance", "GIT_COMMITTER_EMAIL": "accept@localhost",
           "GIT_CONFIG_NOSYSTEM": "1"}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def revision_of(data: bytes) -> str:
    return "sha256:" + sha256_hex(data)


def png_bytes() -> bytes:
    """A valid 2x2 RGB PNG (signature, IHDR, IDAT, IEND with CRCs)."""
    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (struct.pack(">I", len(payload)) + kind + payload
                + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + bytes([255, 0, 0, 0, 255, 0]) for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def pdf_bytes() -> bytes:
    """A one-page PDF with the customary binary comment line after the header."""
    return (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
            b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
            b"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 72 72] >> endobj\n"
            b"trailer << /Root 1 0 R >>\n%%EOF\n")


def binary_bytes() -> bytes:
    """1 KiB holding every byte value four times (NUL and invalid UTF-8 included)."""
    return bytes(range(256)) * 4


MIXED_INPUTS = {"image.png": png_bytes(), "doc.pdf": pdf_bytes(), "blob.bin": binary_bytes(),
                "note.txt": NOTE.encode()}
TRANSFERRED = ("image.png", "doc.pdf", "blob.bin")


def large_bytes_sha256() -> str:
    """sha256 of what LARGE_SCRIPT writes: ten 1 MiB blocks of every byte value, then a
    newline (10 MiB + 1 bytes)."""
    digest, block = hashlib.sha256(), bytes(range(256)) * 4096
    for _ in range(10):
        digest.update(block)
    digest.update(b"\n")
    return digest.hexdigest()


def write_data_project(root: Path) -> None:
    files: dict[str, bytes] = {
        "notes/five.txt": FIVE_LINES.encode(),
        "mixed/sorted/note.txt": CONFLICTING_NOTE.encode(),
        "csv/east.csv": EAST_CSV.encode("utf-8"),
        "csv/west.csv": WEST_CSV.encode("utf-16"),
        "stale/plan.txt": STALE_TEXT.encode(),
        "big/small.txt": SMALL_TEXT.encode(),
        **{f"mixed/inbox/{name}": data for name, data in MIXED_INPUTS.items()},
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def write_code_project(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text(BROKEN_CALC, encoding="utf-8")
    (root / "test_calc.py").write_text(TEST_CALC, encoding="utf-8")
    env = {**os.environ, **GIT_ENV, "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "-q", "-b", "main"], ["add", "calc.py", "test_calc.py"],
                 ["-c", "commit.gpgsign=false", "commit", "-q", "-m", "calculator with a bug"]):
        done = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise RuntimeError(f"git {args[0]} failed in the code project: "
                               f"{done.stderr.strip()[:200]}")
