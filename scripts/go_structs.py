"""Go type declarations of upstream's API packages, read from source for the generators of this directory.

Enough of Go's syntax for k8s.io/api and apimachinery's API types, whose files gofmt keeps regular: top-level
`type Name struct {` blocks with one field a line, each with its struct tags, and `type Name Underlying`
(`= Underlying` for an alias). Fields embedded `json:",inline"` are flattened into their struct, from any package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_TYPE = re.compile(r"^type (\w+) (?:=\s*)?(.*?)\s*(?://.*)?$")
_FIELD = re.compile(r"^\t(?:(\w+) +)?([\w.\[\]*{}]+) +`([^`]*)`")
_TAG = re.compile(r'(\w+):"([^"]*)"')
_IMPORT = re.compile(r'^\s*(?:import\s+)?(?:(\w+)\s+)?"([\w./-]+)"')
API_PATH = "k8s.io/api/"
APIMACHINERY_PATH = "k8s.io/apimachinery/"


@dataclass(frozen=True)
class Named:
    """A Go type as written (`*metav1.Time`, `[]Container`) and where: its package and its file's imports, which
    say what an alias in it stands for."""

    go_type: str
    package: str
    imports: dict[str, str]


@dataclass(frozen=True)
class GoField:
    """One field of a struct: its JSON name, the options after it ("omitempty", "inline"), its tags, its type."""

    json: str
    options: frozenset[str]
    tags: dict[str, str]
    type: Named


@dataclass
class Package:
    """One Go package: its structs' fields in order, and every named type's underlying type ("struct" for a
    struct, "interface" for an interface)."""

    path: str
    structs: dict[str, list[GoField]] = field(default_factory=dict)
    underlying: dict[str, Named] = field(default_factory=dict)


class Universe:
    """The packages of a k8s.io/api and a k8s.io/apimachinery checkout, parsed as they are asked for."""

    def __init__(self, api_root: str, apimachinery_root: str) -> None:
        self.roots = {API_PATH: Path(api_root), APIMACHINERY_PATH: Path(apimachinery_root)}
        self._packages: dict[str, Package] = {}

    def package(self, path: str) -> Package:
        if path not in self._packages:
            prefix = next((p for p in self.roots if path.startswith(p)), None)
            if prefix is None:
                raise KeyError(f"no checkout holds {path}")
            self._packages[path] = _parse(path, self.roots[prefix] / path[len(prefix):])
        return self._packages[path]

    def resolve(self, named: Named) -> tuple[Package, str]:
        """A named type's package and name: `metav1.Time` written in apps/v1 → (meta/v1, `Time`)."""
        alias, _, name = named.go_type.lstrip("*").rpartition(".")
        return self.package(named.imports[alias] if alias else named.package), name

    def fields(self, package: Package, struct: str) -> list[GoField]:
        """A struct's fields with those of its inline embedded structs in their place (through a type defined as
        another struct type, or an alias of one: `type Rule = v1.Rule`)."""
        if struct not in package.structs:
            return self.fields(*self.resolve(package.underlying[struct]))
        out: list[GoField] = []
        for f in package.structs[struct]:
            if "inline" in f.options and not f.json:
                out += self.fields(*self.resolve(f.type))
            elif f.json and f.json != "-":
                out.append(f)
        return out


def _parse(path: str, directory: Path) -> Package:
    package = Package(path)
    for source in sorted(directory.glob("*.go")):
        if source.name.endswith("_test.go"):
            continue
        imports: dict[str, str] = {}
        current = ""
        in_imports = False
        for line in source.read_text().splitlines():
            if line.startswith("import ("):
                in_imports = True
            elif in_imports and line.startswith(")"):
                in_imports = False
            elif in_imports or line.startswith("import "):
                m = _IMPORT.match(line)
                if m:
                    imports[m.group(1) or m.group(2).rsplit("/", 1)[-1]] = m.group(2)
            elif m := _TYPE.match(line):
                name, underlying = m.groups()
                if underlying.startswith("struct"):
                    current = name if underlying.endswith("{") else ""
                    package.structs[name] = []
                    underlying = "struct"
                elif underlying.startswith("interface"):
                    underlying = "interface"
                package.underlying[name] = Named(underlying, path, imports)
            elif line == "}":
                current = ""
            elif current and (m := _FIELD.match(line)):
                tags = dict(_TAG.findall(m.group(3)))
                json_name, *options = tags.get("json", "").split(",")
                package.structs[current].append(GoField(json_name, frozenset(options), tags,
                                                        Named(m.group(2), path, imports)))
    return package


def client_structs(universe: Universe) -> list[tuple[str, Package, str]]:
    """(client model, package, struct) of every struct of every API group-version (k8s.io/api's
    `<group>/<version>/types.go` packages, and meta/v1) that the official client has a model for."""
    from gen_int32_fields import _client_model, model_names  # the client's models: only the generators need them

    names = model_names()
    out = []
    paths = [f"{API_PATH}{p.parent.relative_to(universe.roots[API_PATH])}"
             for p in sorted(universe.roots[API_PATH].glob("*/*/types.go"))]
    for path in [*paths, f"{APIMACHINERY_PATH}pkg/apis/meta/v1"]:
        package = universe.package(path)
        prefix = "io.k8s.api." + path[len(API_PATH):].replace("/", ".") if path.startswith(API_PATH) else \
            "io.k8s.apimachinery.pkg.apis.meta.v1"
        for struct in package.structs:
            model = _client_model(f"{prefix}.{struct}", names)
            if model is not None:
                out.append((model, package, struct))
    return out
