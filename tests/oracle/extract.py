#!/usr/bin/env python3
"""Reads Redisson's Lua scripts out of Redisson's released jars.

The differential tests, the tests that share locks with Redisson's scripts
and the benches run Redisson's own Lua as the oracle. The scripts are string
constants in the jars' class files; tests/oracle/redisson.toml names, for
each script, the Redisson version, the class that holds it and its SHA1.
This program takes each jar from the local Maven repository (fetching it
from Maven Central with `mvn dependency:get` the first time), reads the
constant pool of each named class, and writes the constant whose SHA1 is the
manifest's to <out>/<version>/<name>.lua, byte for byte. A class with no
such constant fails the run with the script's name: a jar or a manifest that
disagree is never papered over.

    python3 tests/oracle/extract.py [--out DIR]

Scripts already extracted whose SHA1 still matches are left alone, so a run
after the first needs neither Maven nor the network.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = Path(__file__).resolve().with_name("redisson.toml")
GROUP = "org.redisson"
ARTIFACT = "redisson"


class OracleError(Exception):
    """The oracle cannot be had: the message says which script and why."""


def sha1(text: bytes) -> str:
    return hashlib.sha1(text).hexdigest()


# ---------------------------------------------------------------------------
# Class files
# ---------------------------------------------------------------------------

# Sizes of the constant-pool entries other than Utf8 (JVMS §4.4), by tag.
_FIXED = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4,
          15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
_UTF8, _STRING, _LONG, _DOUBLE = 1, 8, 5, 6


def decode_modified_utf8(raw: bytes) -> bytes:
    """The UTF-8 bytes of a class file's modified UTF-8 (JVMS §4.4.7): NUL
    is C0 80 there and a character beyond the BMP a pair of 3-byte
    surrogates. A script's text is ASCII, but a wrong decoding must not make
    a wrong SHA1 silently."""
    if b"\xc0\x80" not in raw and b"\xed" not in raw:
        return raw
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return text.encode("utf-16", "surrogatepass").decode("utf-16").encode("utf-8")


def string_constants(data: bytes) -> list[bytes]:
    """The String constants of a class file (the literals its code loads),
    as UTF-8."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise OracleError("not a class file")
    count = struct.unpack(">H", data[8:10])[0]
    pos, index = 10, 1
    utf8: dict[int, bytes] = {}
    strings: list[int] = []
    while index < count:
        tag = data[pos]
        pos += 1
        if tag == _UTF8:
            length = struct.unpack(">H", data[pos:pos + 2])[0]
            utf8[index] = data[pos + 2:pos + 2 + length]
            pos += 2 + length
        elif tag == _STRING:
            strings.append(struct.unpack(">H", data[pos:pos + 2])[0])
            pos += 2
        elif tag in _FIXED:
            pos += _FIXED[tag]
        else:
            raise OracleError(f"unknown constant-pool tag {tag}")
        # A Long or a Double takes two slots of the pool.
        index += 2 if tag in (_LONG, _DOUBLE) else 1
    return [decode_modified_utf8(utf8[i]) for i in strings]


# ---------------------------------------------------------------------------
# Jars
# ---------------------------------------------------------------------------

def maven_repository() -> Path:
    configured = os.environ.get("MAVEN_REPO")
    return Path(configured) if configured else Path.home() / ".m2" / "repository"


def jar_path(version: str) -> Path:
    return (maven_repository() / GROUP.replace(".", "/") / ARTIFACT / version
            / f"{ARTIFACT}-{version}.jar")


def fetch_jar(version: str) -> Path:
    """The jar of Redisson `version`, from the local Maven repository;
    Maven fetches it from Maven Central when it is not there yet."""
    path = jar_path(version)
    if path.is_file():
        return path
    artifact = f"{GROUP}:{ARTIFACT}:{version}"
    print(f"oracle: fetching {artifact} with Maven", file=sys.stderr)
    command = ["mvn", "-B", "-q", "-ntp", "dependency:get",
               f"-Dartifact={artifact}", "-Dtransitive=false"]
    if os.environ.get("MAVEN_REPO"):
        command.append(f"-Dmaven.repo.local={maven_repository()}")
    try:
        subprocess.run(command, check=True, stdin=subprocess.DEVNULL, timeout=600)
    except FileNotFoundError as e:
        raise OracleError("Maven (mvn) is not installed: `make java-deps` installs it") from e
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        raise OracleError(f"Maven could not fetch {artifact}: {e}") from e
    if not path.is_file():
        raise OracleError(f"Maven reported success but {path} does not exist "
                          "(set MAVEN_REPO to the local repository Maven uses)")
    return path


# ---------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------

def wanted(out: Path, script: dict[str, str]) -> bool:
    """Whether `script` still has to be written: absent, or not the text
    the manifest names."""
    target = out / f"{script['name']}.lua"
    return not (target.is_file() and sha1(target.read_bytes()) == script["sha1"])


def extract_set(name: str, spec: dict, root: Path) -> list[str]:
    """Writes the set's scripts under root/<folder>; returns what it wrote."""
    version = spec["version"]
    out = root / spec["folder"]
    todo = [s for s in spec["scripts"] if wanted(out, s)]
    if not todo:
        return []
    jar = zipfile.ZipFile(fetch_jar(version))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    constants: dict[str, list[bytes]] = {}
    for script in todo:
        cls = script["class"]
        if cls not in constants:
            try:
                constants[cls] = string_constants(jar.read(f"{cls}.class"))
            except KeyError as e:
                raise OracleError(f"script {name}/{script['name']}: redisson-{version}.jar "
                                  f"has no class {cls}") from e
        found = [c for c in constants[cls] if sha1(c) == script["sha1"]]
        if not found:
            held = sorted(sha1(c) for c in constants[cls] if b"redis.call" in c)
            raise OracleError(
                f"script {name}/{script['name']}: no constant of {cls} in redisson-{version}.jar "
                f"has SHA1 {script['sha1']} (the class holds scripts {', '.join(held) or 'none'})")
        target = out / f"{script['name']}.lua"
        partial = target.with_suffix(".lua.partial")
        partial.write_bytes(found[0])
        partial.replace(target)
        written.append(f"{spec['folder']}/{script['name']}.lua")
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "target" / "redisson-lua",
                        help="where <version>/<name>.lua go (default: target/redisson-lua)")
    args = parser.parse_args()
    with MANIFEST.open("rb") as f:
        sets = tomllib.load(f)["sets"]
    try:
        for name, spec in sets.items():
            written = extract_set(name, spec, args.out)
            folder = args.out / spec["folder"]
            state = f"extracted {len(written)}" if written else "up to date"
            print(f"oracle: {spec['variable']}={folder} (Redisson {spec['version']}, "
                  f"{len(spec['scripts'])} scripts, {state})")
    except OracleError as e:
        print(f"oracle: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
