"""Generate `kubelite/apiserver/proto/table.py` from upstream's generated.proto files.

    python -m kubelite.apiserver.proto.generate \\
        --source API_GIT_DIR@REF --source APIMACHINERY_GIT_DIR@REF --source METRICS_GIT_DIR@REF

Each source is a bare git directory of k8s.io/api, k8s.io/apimachinery or k8s.io/metrics (as `fetch` mirrors
them) at a tag or commit; files are read with `git show`, so no work tree is needed. The .proto files give the message
structure and field numbers; the Go types next to them give what the proto files cannot: the json name, whether
the field is a pointer (proto2 presence), `omitempty`, and embedded structs inlined into their parent's JSON
(`VolumeSource` in `Volume`). Types declared as `type X []string` (`ExtraValue`, `Verbs`) are wrapper messages
whose JSON is the bare list.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kubelite.apiserver.proto.flags import INLINE, MAP, OMITEMPTY, POINTER, REPEATED

OUT = Path(__file__).with_name("table.py")
# Which k8s.io/api packages to include: the stable group-versions (what kubelite can serve) and metrics.k8s.io.
DEFAULT_VERSIONS = re.compile(r"\.v[12]$|^metrics\.v1beta1$")
_PREFIXES = ("k8s.io.api.", "k8s.io.apimachinery.pkg.apis.", "k8s.io.apimachinery.pkg.api.",
             "k8s.io.apimachinery.pkg.util.", "k8s.io.apimachinery.pkg.", "k8s.io.metrics.pkg.apis.")
_FIELD = re.compile(r"^\s*(optional|repeated|required)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
_MAP_FIELD = re.compile(r"^\s*map<\s*(\w+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
_GO_FIELD = re.compile(r'^\s*(\w+\s+)?([*\[\]\w.]+)\s+`([^`]*)`')
_GO_TAG = re.compile(r'(\w+):"([^"]*)"')
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "double", "float",
           "fixed32", "fixed64", "sfixed32", "sfixed64"}


@dataclass
class GoField:
    json: str
    flags: int


def short(package: str) -> str:
    """`k8s.io.api.core.v1` → `core.v1`, `k8s.io.apimachinery.pkg.apis.meta.v1` → `meta.v1`."""
    for prefix in _PREFIXES:
        if package.startswith(prefix):
            return package[len(prefix):]
    raise ValueError(f"unexpected proto package {package}")


def git(source: str, *args: str) -> str:
    gitdir, _, _ = source.partition("@")
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True).stdout


def go_structs(source: str, ref: str, directory: str) -> tuple[dict[str, dict[int, GoField]], set[str]]:
    """Per Go struct, its protobuf-tagged fields by number; and the names declared as slices (`type X []T`)."""
    structs: dict[str, dict[int, GoField]] = {}
    slices: set[str] = set()
    names = git(source, "ls-tree", "--name-only", f"{ref}:{directory}").split()
    for name in names:
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith(("zz_generated", "generated")):
            continue
        current: dict[int, GoField] | None = None
        for line in git(source, "show", f"{ref}:{directory}/{name}").splitlines():
            if m := re.match(r"^type (\w+) struct \{", line):
                current = structs.setdefault(m.group(1), {})
            elif m := re.match(r"^type (\w+) \[\]", line):
                slices.add(m.group(1))
            elif line.startswith("}"):
                current = None
            elif current is not None and (m := _GO_FIELD.match(line)):
                tags = dict(_GO_TAG.findall(m.group(3)))
                proto_tag = tags.get("protobuf", "").split(",")
                if len(proto_tag) < 2:  # untagged, or `protobuf:"-"`
                    continue
                number = int(proto_tag[1])
                json_name, _, options = tags.get("json", "").partition(",")
                flags = OMITEMPTY if "omitempty" in options else 0
                if m.group(2).startswith("*"):
                    flags |= POINTER
                if m.group(1) is None and json_name == "":  # an embedded struct without a json name is inlined
                    flags |= INLINE
                current[number] = GoField(json_name, flags)
    return structs, slices


def group_name(source: str, ref: str, directory: str) -> str:
    doc = git(source, "show", f"{ref}:{directory}/doc.go")
    m = re.search(r"^// \+groupName=(\S*)", doc, re.M)
    return m.group(1) if m else directory.split("/")[-2]


def parse_proto(text: str) -> tuple[str, dict[str, list[tuple[int, str, str, int, str]]]]:
    """The package and, per message, (number, proto name, type, label flags, map key type)."""
    package = re.search(r"^package ([\w.]+);", text, re.M).group(1)  # type: ignore[union-attr]
    messages: dict[str, list[tuple[int, str, str, int, str]]] = {}
    fields: list[tuple[int, str, str, int, str]] = []
    for line in text.splitlines():
        if m := re.match(r"^message (\w+) \{", line):
            fields = messages.setdefault(m.group(1), [])
        elif m := _FIELD.match(line):
            label, typ, name, number = m.groups()
            fields.append((int(number), name, typ, REPEATED if label == "repeated" else 0, ""))
        elif m := _MAP_FIELD.match(line):
            key, value, name, number = m.groups()
            fields.append((int(number), name, value, MAP, key))
    return package, messages


def resolve(typ: str, package: str) -> str:
    if typ in SCALARS:
        return typ
    if typ.startswith("."):
        pkg, _, name = typ[1:].rpartition(".")
        return f"{short(pkg)}.{name}"
    return f"{short(package)}.{typ}"


def generate(sources: list[str], versions: re.Pattern[str]) -> str:
    messages: dict[str, tuple[tuple[int, str, str, int, str], ...]] = {}
    lists: set[str] = set()
    kinds: dict[str, str] = {}
    roots: set[str] = set()  # messages of the wanted packages; others only as far as these reference them
    for source in sources:
        _, _, ref = source.partition("@")
        for path in git(source, "ls-tree", "-r", "--name-only", ref).split():
            if not path.endswith("/generated.proto"):
                continue
            directory = path.rsplit("/", 1)[0]
            package, parsed = parse_proto(git(source, "show", f"{ref}:{path}"))
            is_api = not package.startswith("k8s.io.apimachinery.")
            if "testapigroup" in package:
                continue
            wanted = not is_api or bool(versions.search(short(package)))
            structs, slices = go_structs(source, ref, directory)
            group = group_name(source, ref, directory) if is_api else ""
            version = directory.split("/")[-1]
            for name, fields in parsed.items():
                key = f"{short(package)}.{name}"
                go = structs.get(name, {})
                messages[key] = tuple(
                    (number, go[number].json if number in go else proto_name, resolve(typ, package),
                     flags | (go[number].flags & ~(INLINE if typ in SCALARS else 0) if number in go else 0), map_key)
                    for number, proto_name, typ, flags, map_key in fields)
                if name in slices:
                    lists.add(key)
                if wanted:
                    roots.add(key)
                if wanted and (is_api or key.startswith("meta.v1.")) and _is_kind(source, ref, directory, name):
                    # meta/v1 kinds (DeleteOptions, Status, WatchEvent…) belong to every group-version: "*/Kind"
                    gv = f"{group + '/' if group else ''}{version}" if is_api else "*"
                    kinds[f"{gv}/{name}"] = key
    messages = {key: messages[key] for key in _closure(roots, messages)}
    lists &= messages.keys()
    header = ('"""Generated by `python -m kubelite.apiserver.proto.generate` from upstream\'s generated.proto files\n'
              "(k8s.io/api, k8s.io/apimachinery, k8s.io/metrics; Apache-2.0). Do not edit.\n\n"
              "MESSAGES: message → fields (number, json name, type or message, flags, map key type).\n"
              'LISTS: wrapper messages whose JSON is the bare list of field 1. KINDS: "apiVersion/Kind" → message,\n'
              '"*/Kind" for the meta/v1 kinds every group-version has.\n'
              '"""\n\n')
    sources_line = "".join(f"# source: {Path(s.partition('@')[0]).parent.name} {_commit(s)}\n" for s in sources)
    lines = [header, sources_line, "# ruff: noqa: E501\n",
             "MESSAGES: dict[str, tuple[tuple[int, str, str, int, str], ...]] = {\n"]
    lines += [f"    {key!r}: {fields!r},\n" for key, fields in sorted(messages.items())]
    lines += ["}\n\n", f"LISTS: frozenset[str] = frozenset({sorted(lists)!r})\n\n", "KINDS: dict[str, str] = {\n"]
    lines += [f"    {kind!r}: {key!r},\n" for kind, key in sorted(kinds.items())]
    lines.append("}\n")
    body = "".join(lines)
    return body


def _closure(roots: set[str], messages: dict[str, tuple[tuple[int, str, str, int, str], ...]]) -> set[str]:
    """The roots and every message they reference, transitively (a stable JobSpec may use an alpha message)."""
    seen, stack = set(), list(roots)
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        stack += [typ for _, _, typ, _, _ in messages[key] if typ in messages]
    return seen


def _commit(source: str) -> str:
    ref = source.partition("@")[2]
    commit = git(source, "rev-parse", ref).strip()
    return commit + (f" ({ref})" if ref != commit else "")


_kind_cache: dict[tuple[str, str], str] = {}


def _is_kind(source: str, ref: str, directory: str, name: str) -> bool:
    """A top-level kind embeds metav1.TypeMeta (the Go struct says `metav1.TypeMeta \\`json:",inline"\\``)."""
    key = (source, directory)
    if key not in _kind_cache:
        names = git(source, "ls-tree", "--name-only", f"{ref}:{directory}").split()
        _kind_cache[key] = "\n".join(git(source, "show", f"{ref}:{directory}/{n}") for n in names
                                     if n.endswith(".go") and not n.startswith(("zz_", "generated")))
    m = re.search(rf"^type {name} struct \{{(.*?)^\}}", _kind_cache[key], re.M | re.S)
    return bool(m and re.search(r"^\s*(metav1\.)?TypeMeta\s", m.group(1), re.M))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", action="append", required=True, help="GIT_DIR@REF (repeatable)")
    parser.add_argument("--versions", default=DEFAULT_VERSIONS.pattern,
                        help="regex over short k8s.io/api packages (core.v1) to include (default: stable ones)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.write_text(generate(args.source, re.compile(args.versions)))


if __name__ == "__main__":
    main()
