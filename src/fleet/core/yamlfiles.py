"""Every YAML document the service reads, read here: `fleet apply`, what-if (the command and the
dashboard's upload), the demo's fleet file.

YAML's anchors and aliases let a document of a few hundred bytes stand for billions of nodes (the
"billion laughs": `a0: &a0 [x,x]`, `a1: &a1 [*a0,*a0]`, … 25 levels is 777 bytes and held a thread
for a minute of CPU before anything looked at it). A fleet file has no need of them, so they are
refused outright, as the parser meets the first one, with the line it is on; so is a document
larger than `MAX_YAML_BYTES` or nested deeper than `MAX_YAML_DEPTH` (the pure-Python composer
recurses once per level). The agent reads its own config file with the same rule in its own code
(`fleet_agent.config`), as it imports nothing of the service.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.conf import settings
from yaml.events import AliasEvent
from yaml.nodes import Node

#: Bytes a YAML document may have unless `FLEET_MAX_YAML_BYTES` says otherwise (the example fleet
#: file is 13 kB; 10,000 devices are about 1.5 MB).
DEFAULT_MAX_YAML_BYTES = 8 * 1024 * 1024
MAX_YAML_DEPTH = 64


class YamlRefused(ValueError):
    """The document is not read: `message` says why, `line` where (1-based), when it has one."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(message)


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses an anchor or an alias, and nesting past the limit, the
    moment the composer reaches one: nothing is expanded, nothing is built."""

    depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            line = event.start_mark.line + 1
            raise YamlRefused(f"anchors and aliases are not allowed (line {line})", line)
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                line = event.start_mark.line + 1
                raise YamlRefused(f"nested deeper than {MAX_YAML_DEPTH} levels (line {line})", line)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def max_yaml_bytes() -> int:
    return int(getattr(settings, "MAX_YAML_BYTES", DEFAULT_MAX_YAML_BYTES))


def load_yaml(text: str) -> Any:
    """The document's one value (None for an empty one), as `yaml.safe_load` reads it, or
    `YamlRefused` (size, anchors and aliases, depth) or `yaml.YAMLError` (not YAML)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_yaml_bytes():
        raise YamlRefused(f"the document is {size} bytes; at most {max_yaml_bytes()} are read")
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
