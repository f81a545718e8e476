"""The config model as JSON Schema, and ``docs/config-at-a-glance.md`` generated from it.

- :func:`config_json_schema` (``"config"`` | ``"providers"``) -> dict: JSON Schema 2020-12 of
  config.yaml (:class:`DeploymentConfig`) or providers.yaml (:class:`Catalog`). Defaults built by a
  ``default_factory`` are included, so every default a key has appears in the schema.
  ``busbar --print-schema [config|providers]`` prints it (:func:`schema_text`).
- :func:`render_at_a_glance` -> str: one table per section, one row per key path
  (``pools.<pool>.members[].weight``) with type, default and the model's own docstring.
  ``python -m busbar.config.schema_export --write`` regenerates the doc; ``--check`` exits 1 when it
  is stale (a test does the same).

What must not live here: the models (``busbar.config.schema*``) or any hand-written key docs; the
doc is only ever generated.

Source: docs/configuration.md#sections ("Looking for a one-page map of every key? See Config at a glance").
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, NoDefault

DOC_PATH = Path("docs/config-at-a-glance.md")
_PLACEHOLDERS = {"providers": "<provider>", "models": "<model>", "pools": "<pool>", "groups": "<group>",
                 "rate_card": "<model>", "role_bindings": "<module>", "error_map": "<code>",
                 "min_versions": "<plugin>", "": "<provider>"}
_OPAQUE = {"settings"}  # a plugin's own config: documented by the plugin
_SECRET_DEFS = {"EnvRef", "FileRef", "ModuleRef"}


class _WithFactoryDefaults(GenerateJsonSchema):
    def get_default_value(self, schema: Any) -> Any:
        value = super().get_default_value(schema)
        factory = schema.get("default_factory")
        if value is NoDefault and factory is not None and not schema.get("default_factory_takes_data"):
            return factory()
        return value


def attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring written right under the field, over the class and its bases."""
    import ast
    import inspect
    import itertools
    import textwrap

    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith(("pydantic", "builtins")):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for field, doc in itertools.pairwise(body):
            if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                    and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                    and isinstance(doc.value.value, str)):
                out[field.target.id] = inspect.cleandoc(doc.value.value)
    return out


def _models(root: Any) -> dict[str, type]:
    """Every pydantic model reachable from ``root``'s fields, by class name."""
    from typing import get_args

    from pydantic import BaseModel

    found: dict[str, type] = {}
    todo: list[Any] = [root]
    while todo:
        tp = todo.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ in found:
                continue
            found[tp.__name__] = tp
            todo += [f.annotation for f in tp.model_fields.values()]
        else:
            todo += list(get_args(tp))
    return found


def _describe(schema: dict[str, Any], root: Any) -> None:
    """Copy the field docstrings into ``properties.*.description`` (root and every ``$defs`` entry)."""
    models = _models(root)
    targets = [(root.__name__, schema)] + list(schema.get("$defs", {}).items())
    for name, node in targets:
        cls = models.get(name)
        if cls is None or not isinstance(node.get("properties"), dict):
            continue
        docs = attribute_docs(cls)
        for key, prop in node["properties"].items():
            if key in docs and "description" not in prop:
                prop["description"] = docs[key]


def config_json_schema(which: str = "config") -> dict[str, Any]:
    """JSON Schema of config.yaml (``which="config"``) or providers.yaml (``"providers"``)."""
    from busbar.config.schema import Catalog, DeploymentConfig

    model: Any = DeploymentConfig if which == "config" else Catalog
    schema = model.model_json_schema(schema_generator=_WithFactoryDefaults)
    _describe(schema, model)
    title = "Busbar config.yaml" if which == "config" else "Busbar providers.yaml"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title,
            **{k: v for k, v in schema.items() if k != "title"}}


def schema_text(which: str = "config") -> str:
    """:func:`config_json_schema` as indented JSON text."""
    return json.dumps(config_json_schema(which), indent=2, ensure_ascii=False)


# ---------------------------------------------------------------- the at-a-glance doc


class _Doc:
    def __init__(self, schema: dict[str, Any]):
        self.defs = schema.get("$defs", {})
        self.rows: list[tuple[str, str, str, str]] = []

    def resolve(self, node: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        ref = node.get("$ref")
        if ref:
            name = ref.rsplit("/", 1)[-1]
            return name, self.defs[name]
        return None, node

    def variants(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        alts = node.get("anyOf") or node.get("oneOf")
        if not alts:
            return [node]
        out: list[dict[str, Any]] = []
        for a in alts:
            if a.get("type") != "null":
                out += self.variants(a)
        return out

    def type_of(self, node: dict[str, Any]) -> str:
        alts = self.variants(node)
        names = {self.resolve(a)[0] for a in alts}
        if names and names <= _SECRET_DEFS:
            return "secret ref"
        words = [self._one_type(a) for a in alts]
        return " or ".join(dict.fromkeys(words)) if words else "any"

    def _one_type(self, node: dict[str, Any]) -> str:
        name, body = self.resolve(node)
        if name in _SECRET_DEFS:
            return "secret ref"
        if "enum" in body:
            return " / ".join(str(v) for v in body["enum"])
        t = body.get("type")
        if t == "array":
            return f"list of {self.type_of(body.get('items', {}))}"
        if t == "object" or name:
            extra = body.get("additionalProperties")
            if isinstance(extra, dict) and not body.get("properties"):
                one = " (one entry)" if body.get("maxProperties") == 1 else ""
                return f"map of {self.type_of(extra)}{one}"
            return "map"
        return {"integer": "integer", "number": "number", "boolean": "bool", "string": "string"}.get(
            str(t), "any")

    def walk(self, props: dict[str, Any], required: set[str], prefix: str, section: str,
             attrs: dict[str, str] | None = None) -> None:
        attrs = attrs or {}
        for key, prop in props.items():
            path = f"{prefix}.{key}" if prefix else key
            if "default" in prop:
                default = prop["default"]
                if default is None:
                    shown = "unset"
                elif isinstance(default, dict) and default and "$ref" in prop:
                    shown = "(defaults below)"
                else:
                    shown = f"`{json.dumps(default, ensure_ascii=False)}`"
            else:
                shown = "**required**" if key in required else "unset"
            text = prop.get("description") or attrs.get(key, "")
            desc = " ".join(str(text).split()).replace("``", "`").replace("|", "\\|")
            self.rows.append((section, path, self.type_of(prop), f"{shown} | {desc}"))
            if key not in _OPAQUE:
                self.descend(prop, path, section, key)

    def descend(self, node: dict[str, Any], path: str, section: str, key: str) -> None:
        for alt in self.variants(node):
            name, body = self.resolve(alt)
            if name in _SECRET_DEFS:
                continue
            if body.get("properties"):
                self.walk(body["properties"], set(body.get("required", ())), path, section,
                          _attributes(str(body.get("description", ""))))
            elif body.get("type") == "array":
                self.descend(body.get("items", {}), f"{path}[]", section, key)
            elif isinstance(body.get("additionalProperties"), dict):
                inner = body["additionalProperties"]
                if body.get("maxProperties") == 1:
                    self.descend(inner, f"{path}.<module>", section, key)
                else:
                    sub = "<role>" if key == "<module>" else _PLACEHOLDERS.get(key, "<name>")
                    self.descend(inner, f"{path}.{sub}", section, sub)


def _attributes(doc: str) -> dict[str, str]:
    """Field texts from a Google-style ``Attributes:`` section (models without attribute docstrings)."""
    out: dict[str, str] = {}
    current = None
    inside = False
    for line in doc.splitlines():
        if line.strip() == "Attributes:":
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            break
        head = line.strip()
        name, sep, text = head.partition(": ")
        if sep and name.isidentifier() and line.startswith("    ") and not line.startswith("     "):
            current = name
            out[name] = text
        elif current and head:
            out[current] += " " + head
    return out


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    out = ["| key | type | default | notes |", "| --- | --- | --- | --- |"]
    out += [f"| `{path}` | {typ} | {rest} |" for _, path, typ, rest in rows]
    return out


def render_at_a_glance() -> str:
    """The whole markdown document (deterministic: same model, same bytes)."""
    cfg = config_json_schema("config")
    doc = _Doc(cfg)
    for key, prop in cfg["properties"].items():
        doc.walk({key: prop}, set(cfg.get("required", ())), "", key)
    lines = [
        "# Config at a glance",
        "",
        "<!-- GENERATED from the typed config model (kernel/src/busbar/config/schema*.py) by",
        "     `python -m busbar.config.schema_export --write`. Do not edit by hand: a test fails when",
        "     this file is stale. -->",
        "",
        "Every key of `config.yaml` and `providers.yaml`: its type, its default when omitted, and what it",
        "does. `<pool>`, `<model>`, ... stand for names you choose; `[]` marks a list item. Secret",
        "references are `{ env: VAR }`, `{ file: /path }` or `{ module: <secret-plugin>, settings: {...} }`.",
        "Unknown keys are rejected at every level. The full reference, with examples and every startup",
        "check, is [configuration.md](configuration.md); the JSON Schema is `busbar --print-schema`.",
        "",
        "## config.yaml",
    ]
    for section in cfg["properties"]:
        rows = [r for r in doc.rows if r[0] == section]
        lines += ["", f"### `{section}`", ""] + _table(rows)
    cat = config_json_schema("providers")
    cdoc = _Doc(cat)
    cdoc.descend(cat, "", "providers.yaml", "")
    lines += ["", "## providers.yaml", "",
              "A map of provider name -> catalog entry. A config.yaml `providers.<provider>` entry may",
              "override every field but the name (error_map merges per code).", ""]
    lines += _table([(s, p.lstrip("."), t, r) for s, p, t, r in cdoc.rows])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``--write [PATH]`` regenerates the doc; ``--check [PATH]`` exits 1 when it is stale."""
    args = list(sys.argv[1:] if argv is None else argv)
    mode = args.pop(0) if args else "--check"
    path = Path(args[0]) if args else DOC_PATH
    text = render_at_a_glance()
    if mode == "--write":
        path.write_text(text, "utf-8")
        return 0
    current = path.read_text("utf-8") if path.exists() else ""
    if current != text:
        print(f"{path} is stale; run: python -m busbar.config.schema_export --write {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
