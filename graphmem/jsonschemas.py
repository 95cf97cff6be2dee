"""JSON Schemas of the import/export format, generated from the models into ``schemas/``.

``python -m graphmem.jsonschemas schemas/`` regenerates them; a test checks the committed files
match the models, so the documented format never drifts from the code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from graphmem.embedding import EmbedderRecord
from graphmem.models import AnyMemory, Edge, Trajectory


def export_schemas() -> dict[str, dict[str, Any]]:
    """File name → JSON Schema for each record type of a JSON Lines export, and for trajectories."""
    node = TypeAdapter(AnyMemory).json_schema(mode="serialization")
    node["title"] = "graphmem export: memory node line"
    node["description"] = 'One line of an export with "type": "node" (the "type" key is removed).'
    edge = Edge.model_json_schema(mode="serialization")
    edge["title"] = "graphmem export: edge line"
    edge["description"] = 'One line of an export with "type": "edge" (the "type" key is removed).'
    header = {
        "title": "graphmem export: header line",
        "type": "object",
        "properties": {
            "type": {"const": "header"},
            "format": {"const": "graphmem.jsonl/1"},
            "dimension": {"type": ["integer", "null"]},
            "embedders": {
                "type": "object",
                "description": "Namespace → the embedder that made its vectors.",
                "additionalProperties": {"$ref": "#/$defs/EmbedderRecord"},
            },
        },
        "required": ["type", "format"],
        "$defs": {"EmbedderRecord": EmbedderRecord.model_json_schema(mode="serialization")},
    }
    trajectory = Trajectory.model_json_schema()
    trajectory["title"] = "graphmem trajectory (input of build)"
    return {
        "export-header.schema.json": header,
        "export-node.schema.json": node,
        "export-edge.schema.json": edge,
        "trajectory.schema.json": trajectory,
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in export_schemas().items():
        path = directory / name
        path.write_text(render(schema), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover
    for p in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(p)
