"""The REST reference, as Markdown, from the daemon's OpenAPI schema (docs/service/openapi.json,
which `python docs/gen/openapi.py` writes from the FastAPI app): every route with its parameters,
body and answers, then every schema with its properties."""

from __future__ import annotations

from typing import Any

SCHEMAS = "#/components/schemas/"
METHODS = ("get", "post", "put", "delete", "patch")


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in one line: a link for a named schema, `array of X`, `A or B`, bounds."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(SCHEMAS)
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(type_of(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {type_of(schema['additionalProperties'])}"
    extras = [f"{word} {schema[key]:g}" for key, word in (("minimum", "≥"), ("maximum", "≤")) if key in schema]
    if "maxLength" in schema:
        extras.append(f"at most {schema['maxLength']} characters")
    if "enum" in schema:
        extras.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    if schema.get("format"):
        extras.append(schema["format"])
    return kind + (f" ({', '.join(extras)})" if extras else "")


def _default(schema: dict[str, Any]) -> str:
    return f" Default: `{_cell(repr(schema['default']))}`." if "default" in schema else ""


def _body(content: dict[str, Any]) -> str:
    return "; ".join(f"`{media}`: {type_of(c.get('schema', {}))}" for media, c in content.items()) or "empty"


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    text = op.get("description") or op.get("summary") or ""
    if text:
        lines += [" ".join(text.split()), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            note = _cell(p.get("description", schema.get("description", ""))) + _default(schema)
            lines.append(f"| `{p['name']}` | {p['in']} | {type_of(schema)} | {'yes' if p.get('required') else 'no'} "
                         f"| {note} |")
        lines.append("")
    if "requestBody" in op:
        lines += [f"Body: {_body(op['requestBody'].get('content', {}))}.", ""]
    # Statuses with the same answer share a row: every error is an ErrorReply.
    answers: dict[str, list[str]] = {}
    for status, response in op.get("responses", {}).items():
        answers.setdefault(_body(response.get("content", {})), []).append(status)
    lines += ["| status | answer |", "|---|---|"]
    lines += [f"| {', '.join(statuses)} | {body} |" for body, statuses in answers.items()]
    return [*lines, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    properties = schema.get("properties", {})
    if not properties:
        return [*lines, f"Type: {type_of(schema)}.", ""]
    required = set(schema.get("required", []))
    lines += ["| property | type | required | |", "|---|---|---|---|"]
    for prop, s in properties.items():
        note = _cell(s.get("description", "")) + _default(s)
        lines.append(f"| `{prop}` | {type_of(s)} | {'yes' if prop in required else 'no'} | {note} |")
    return [*lines, ""]


def render(openapi: dict[str, Any]) -> str:
    """Markdown for an OpenAPI 3 document: `## Routes`, then `## Schemas`."""
    overview = openapi.get("info", {}).get("description", "")
    lines = ["## Routes", ""]
    if overview:
        lines += ["```text", overview.strip(), "```", ""]
    for path, item in openapi.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                lines += _operation(path, method, item[method])
    lines += ["## Schemas", ""]
    for name, schema in openapi.get("components", {}).get("schemas", {}).items():
        lines += _schema(name, schema)
    return "\n".join(lines)
