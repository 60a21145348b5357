"""The contract harness: compare one operation of a spec file with the generated OpenAPI.

For the spec's single operation it takes the operation itself, every component schema reachable
from it by `$ref` (transitively) and the security schemes it uses, and compares each with the
generated schema's counterpart structurally: key order is ignored, descriptions are compared
with whitespace folded, everything else must be equal (list order included).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SPEC_DIR = Path(__file__).parent / "spec"
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


@dataclass(frozen=True)
class Difference:
    path: str
    spec: Any
    generated: Any

    def __str__(self) -> str:
        return f"{self.path}:\n    spec:      {_short(self.spec)}\n    generated: {_short(self.generated)}"


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:297] + "..."


def load_spec(name: str) -> dict:
    return yaml.safe_load((SPEC_DIR / name).read_text())


def single_operation(document: dict) -> tuple[str, str, dict]:
    operations = [
        (path, method, op)
        for path, item in document.get("paths", {}).items()
        for method, op in item.items()
        if method in HTTP_METHODS
    ]
    if len(operations) != 1:
        raise ValueError(f"expected exactly one operation in the spec file, found {len(operations)}")
    return operations[0]


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _refs(value)
    return found


def reachable_components(document: dict, root: Any) -> dict[str, Any]:
    """Component schemas reachable from `root` by `$ref`, transitively."""
    schemas = document.get("components", {}).get("schemas", {})
    seen: dict[str, Any] = {}
    pending = sorted(_refs(root))
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen[name] = schemas.get(name, MISSING)
        if seen[name] is not MISSING:
            pending.extend(sorted(_refs(seen[name]) - set(seen)))
    return seen


def used_security_schemes(document: dict, operation: dict) -> dict[str, Any]:
    schemes = document.get("components", {}).get("securitySchemes", {})
    names = sorted({name for requirement in operation.get("security", []) for name in requirement})
    return {name: schemes.get(name, MISSING) for name in names}


def _fold(text: str) -> str:
    return " ".join(text.split())


def compare(spec: Any, generated: Any, path: str = "") -> list[Difference]:
    if isinstance(spec, dict) and isinstance(generated, dict):
        diffs: list[Difference] = []
        for key in sorted(set(spec) | set(generated), key=str):
            child = f"{path}.{key}" if path else str(key)
            left, right = spec.get(key, MISSING), generated.get(key, MISSING)
            if key == "description" and isinstance(left, str) and isinstance(right, str):
                if _fold(left) != _fold(right):
                    diffs.append(Difference(child, left, right))
            else:
                diffs.extend(compare(left, right, child))
        return diffs
    if isinstance(spec, list) and isinstance(generated, list):
        if len(spec) != len(generated):
            return [Difference(path, spec, generated)]
        diffs = []
        for index, (left, right) in enumerate(zip(spec, generated, strict=True)):
            diffs.extend(compare(left, right, f"{path}[{index}]"))
        return diffs
    if spec != generated or type(spec) is not type(generated):
        return [Difference(path, spec, generated)]
    return []


def contract_differences(spec_document: dict, generated_document: dict) -> list[Difference]:
    """Everything in which the generated schema departs from the spec's one operation."""
    path, method, spec_operation = single_operation(spec_document)
    generated_operation = generated_document.get("paths", {}).get(path, {}).get(method, MISSING)
    diffs = compare(spec_operation, generated_operation, f"paths.{path}.{method}")
    spec_components = reachable_components(spec_document, spec_operation)
    for name, spec_schema in sorted(spec_components.items()):
        generated_schema = generated_document.get("components", {}).get("schemas", {}).get(name, MISSING)
        diffs.extend(compare(spec_schema, generated_schema, f"components.schemas.{name}"))
    if generated_operation is not MISSING:
        extra = set(reachable_components(generated_document, generated_operation)) - set(spec_components)
        for name in sorted(extra):
            diffs.append(Difference(f"components.schemas.{name}", MISSING, "<referenced by the operation>"))
        spec_schemes = used_security_schemes(spec_document, spec_operation)
        generated_schemes = used_security_schemes(generated_document, generated_operation)
        diffs.extend(compare(spec_schemes, generated_schemes, "components.securitySchemes"))
    return diffs


def shared_components_differences(spec_document: dict, generated_document: dict) -> list[Difference]:
    """The spec's operation-independent parts (error components, security schemes) only."""
    diffs = []
    for name in ("ErrorResponse", "ErrorCodeEnum", "FieldError"):
        spec_schema = spec_document["components"]["schemas"][name]
        generated_schema = generated_document.get("components", {}).get("schemas", {}).get(name, MISSING)
        diffs.extend(compare(spec_schema, generated_schema, f"components.schemas.{name}"))
    spec_schemes = spec_document["components"]["securitySchemes"]
    generated_schemes = generated_document.get("components", {}).get("securitySchemes", {})
    diffs.extend(
        compare(
            spec_schemes, {k: generated_schemes.get(k, MISSING) for k in spec_schemes}, "components.securitySchemes"
        )
    )
    return diffs


def report(differences: list[Difference]) -> str:
    if not differences:
        return "no differences"
    return f"{len(differences)} difference(s):\n" + "\n".join(str(d) for d in differences)
