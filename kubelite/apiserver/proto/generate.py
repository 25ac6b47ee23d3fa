"""Generate `kubelite/apiserver/proto/table.py` from upstream's generated.proto files.

    python -m kubelite.apiserver.proto.generate \\
        --source API_GIT_DIR@REF --source APIMACHINERY_GIT_DIR@REF --source METRICS_GIT_DIR@REF

Each source is a bare git directory of k8s.io/api, k8s.io/apimachinery or k8s.io/metrics (as `fetch` mirrors
them) at a tag or commit; files are read with `git show`, so no work tree is needed. The .proto files give the
message structure and field numbers; the Go types next to them give what the proto files cannot: the json name,
whether the field is a pointer (proto2 presence), `omitempty`, and embedded structs inlined into their parent's
JSON (`VolumeSource` in `Volume`). Types declared as `type X []string` (`ExtraValue`, `Verbs`) are wrapper
messages whose JSON is the bare list. Structs embedding TypeMeta are kinds.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kubelite.apiserver.proto.flags import INLINE, MAP, OMITEMPTY, POINTER, REPEATED

OUT = Path(__file__).with_name("table.py")
# Which k8s.io/api packages to include: the stable group-versions (what kubelite can serve) and metrics.k8s.io;
# messages of other versions only as far as these reference them.
DEFAULT_VERSIONS = re.compile(r"\.v[12]$|^metrics\.v1beta1$")
_PREFIXES = ("k8s.io.api.", "k8s.io.apimachinery.pkg.apis.", "k8s.io.apimachinery.pkg.api.",
             "k8s.io.apimachinery.pkg.util.", "k8s.io.apimachinery.pkg.", "k8s.io.metrics.pkg.apis.")
_FIELD = re.compile(r"^\s*(optional|repeated|required)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
_MAP_FIELD = re.compile(r"^\s*map<\s*(\w+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
_GO_FIELD = re.compile(r"^\s*(\w+\s+)?([*\[\]\w.]+)\s+`([^`]*)`")
_GO_TAG = re.compile(r'(\w+):"([^"]*)"')
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "double", "float",
           "fixed32", "fixed64", "sfixed32", "sfixed64"}
ProtoField = tuple[int, str, str, int, str]  # number, name, type, flags, map key type


@dataclass
class GoTypes:
    """What a package's Go source says about its types."""

    fields: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)  # struct → number → (json, flags)
    slices: set[str] = field(default_factory=set)  # `type X []T`
    kinds: set[str] = field(default_factory=set)  # structs embedding TypeMeta


def short(package: str) -> str:
    """`k8s.io.api.core.v1` → `core.v1`, `k8s.io.apimachinery.pkg.apis.meta.v1` → `meta.v1`."""
    for prefix in _PREFIXES:
        if package.startswith(prefix):
            return package[len(prefix):]
    raise ValueError(f"unexpected proto package {package}")


def parse_proto(text: str) -> tuple[str, dict[str, list[ProtoField]]]:
    """The package and, per message, its fields with types resolved to table keys (`meta.v1.ObjectMeta`)."""
    m = re.search(r"^package ([\w.]+);", text, re.M)
    if m is None:
        raise ValueError("no package statement")
    package = m.group(1)
    messages: dict[str, list[ProtoField]] = {}
    fields: list[ProtoField] = []
    for line in text.splitlines():
        if m := re.match(r"^message (\w+) \{", line):
            fields = messages.setdefault(m.group(1), [])
        elif m := _FIELD.match(line):
            label, typ, name, number = m.groups()
            fields.append((int(number), name, _resolve(typ, package), REPEATED if label == "repeated" else 0, ""))
        elif m := _MAP_FIELD.match(line):
            key, value, name, number = m.groups()
            fields.append((int(number), name, _resolve(value, package), MAP, key))
    return package, messages


def _resolve(typ: str, package: str) -> str:
    if typ in SCALARS:
        return typ
    if typ.startswith("."):
        pkg, _, name = typ[1:].rpartition(".")
        return f"{short(pkg)}.{name}"
    return f"{short(package)}.{typ}"


def parse_go(text: str) -> GoTypes:
    """Struct fields' protobuf numbers with their json names and flags, slice types and kinds, from Go source."""
    types = GoTypes()
    current: dict[int, tuple[str, int]] | None = None
    name = ""
    for line in text.splitlines():
        if m := re.match(r"^type (\w+) struct \{", line):
            name, current = m.group(1), types.fields.setdefault(m.group(1), {})
        elif m := re.match(r"^type (\w+) \[\]", line):
            types.slices.add(m.group(1))
        elif line.startswith("}"):
            current = None
        elif current is not None and re.match(r"^\s*(metav1\.)?TypeMeta\s", line):
            types.kinds.add(name)
        elif current is not None and (m := _GO_FIELD.match(line)):
            tags = dict(_GO_TAG.findall(m.group(3)))
            proto_tag = tags.get("protobuf", "").split(",")
            if len(proto_tag) < 2:  # untagged, or `protobuf:"-"`
                continue
            json_name, _, options = tags.get("json", "").partition(",")
            flags = OMITEMPTY if "omitempty" in options else 0
            if m.group(2).startswith("*"):
                flags |= POINTER
            if m.group(1) is None and json_name == "":  # an embedded struct without a json name is inlined
                flags |= INLINE
            current[int(proto_tag[1])] = (json_name, flags)
    return types


def merge(package: str, messages: dict[str, list[ProtoField]], go: GoTypes) -> dict[str, tuple[ProtoField, ...]]:
    """The table rows of one package: proto fields with the Go json names and flags."""
    out = {}
    for name, fields in messages.items():
        tags = go.fields.get(name, {})
        rows = []
        for number, proto_name, typ, flags, map_key in fields:
            json_name, go_flags = tags.get(number, (proto_name, 0))
            if typ in SCALARS:
                go_flags &= ~INLINE  # an embedded scalar type (metav1.Duration's time.Duration) is just a field
            rows.append((number, json_name, typ, flags | go_flags, map_key))
        out[f"{short(package)}.{name}"] = tuple(rows)
    return out


def closure(roots: set[str], messages: dict[str, tuple[ProtoField, ...]]) -> set[str]:
    """The roots and every message they reference, transitively (a stable JobSpec may use an alpha message)."""
    seen, stack = set(), list(roots)
    while stack:
        key = stack.pop()
        if key not in seen:
            seen.add(key)
            stack += [typ for _, _, typ, _, _ in messages[key] if typ in messages]
    return seen


def git(source: str, *args: str) -> str:
    gitdir = source.partition("@")[0]
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True).stdout


def _go_source(source: str, ref: str, directory: str) -> str:
    names = git(source, "ls-tree", "--name-only", f"{ref}:{directory}").split()
    return "\n".join(git(source, "show", f"{ref}:{directory}/{n}") for n in names
                     if n.endswith(".go") and not n.endswith("_test.go") and not n.startswith(("zz_", "generated")))


def _group_name(source: str, ref: str, directory: str) -> str:
    m = re.search(r"^// \+groupName=(\S*)", git(source, "show", f"{ref}:{directory}/doc.go"), re.M)
    return m.group(1) if m else directory.split("/")[-2]


def generate(sources: list[str], versions: re.Pattern[str]) -> str:
    messages: dict[str, tuple[ProtoField, ...]] = {}
    lists: set[str] = set()
    kinds: dict[str, str] = {}
    roots: set[str] = set()
    for source in sources:
        ref = source.partition("@")[2]
        for path in git(source, "ls-tree", "-r", "--name-only", ref).split():
            if not path.endswith("/generated.proto") or "testapigroup" in path:
                continue
            directory = path.rsplit("/", 1)[0]
            package, parsed = parse_proto(git(source, "show", f"{ref}:{path}"))
            go = parse_go(_go_source(source, ref, directory))
            rows = merge(package, parsed, go)
            messages.update(rows)
            lists |= {f"{short(package)}.{name}" for name in go.slices if name in parsed}
            is_api = not package.startswith("k8s.io.apimachinery.")
            if is_api and not versions.search(short(package)):
                continue
            roots |= rows.keys()
            if is_api or short(package) == "meta.v1":
                # meta/v1 kinds (DeleteOptions, Status…) belong to every group-version: "*/Kind"
                group = _group_name(source, ref, directory) if is_api else ""
                gv = (f"{group}/" if group else "") + directory.split("/")[-1] if is_api else "*"
                kinds.update({f"{gv}/{name}": f"{short(package)}.{name}" for name in go.kinds if name in parsed})
    kept = closure(roots, messages)
    return render({k: v for k, v in messages.items() if k in kept}, lists & kept, kinds, sources)


def render(messages: dict[str, tuple[ProtoField, ...]], lists: set[str], kinds: dict[str, str],
           sources: list[str]) -> str:
    lines = ['"""Generated by `python -m kubelite.apiserver.proto.generate` from upstream\'s generated.proto files\n'
             "(k8s.io/api, k8s.io/apimachinery, k8s.io/metrics; Apache-2.0). Do not edit.\n\n"
             "MESSAGES: message → fields (number, json name, type or message, flags, map key type).\n"
             'LISTS: wrapper messages whose JSON is the bare list of field 1. KINDS: "apiVersion/Kind" → message,\n'
             '"*/Kind" for the meta/v1 kinds every group-version has.\n"""\n\n']
    for source in sources:
        ref = source.partition("@")[2]
        commit = git(source, "rev-parse", ref).strip()
        lines.append(f"# source: {Path(source.partition('@')[0]).parent.name} {commit}"
                     f"{f' ({ref})' if ref != commit else ''}\n")
    lines += ["# ruff: noqa: E501\n", "MESSAGES: dict[str, tuple[tuple[int, str, str, int, str], ...]] = {\n"]
    lines += [f"    {key!r}: {fields!r},\n" for key, fields in sorted(messages.items())]
    lines += ["}\n\n", f"LISTS: frozenset[str] = frozenset({sorted(lists)!r})\n\n", "KINDS: dict[str, str] = {\n"]
    lines += [f"    {kind!r}: {key!r},\n" for kind, key in sorted(kinds.items())]
    lines.append("}\n")
    return "".join(lines)


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
