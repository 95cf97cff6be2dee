"""The committed JSON Schemas match the models, and real export lines validate against them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from graphmem.jsonschemas import export_schemas, render
from graphmem.models import Edge, EdgeKind, Note, Procedure, Step
from graphmem.stores.base import MemoryStore

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


@pytest.mark.parametrize("name", sorted(export_schemas()))
def test_committed_schema_is_current(name: str) -> None:
    committed = (SCHEMAS / name).read_text(encoding="utf-8")
    assert committed == render(export_schemas()[name]), (
        f"schemas/{name} is stale: run `python -m graphmem.jsonschemas schemas`"
    )


def test_export_lines_validate(store: MemoryStore, namespace: str) -> None:
    vec = [1.0] + [0.0] * (384 - 1)
    proc = Procedure(
        namespace=namespace, task_text="boil water", key="boil water", granularity="trajectory"
    )
    step = Step(namespace=namespace, procedure_id=proc.id, index=0, action="fill kettle")
    note = Note(namespace=namespace, content='quote " and `tick`', embedding=vec)
    store.upsert(
        [proc, step, note],
        [Edge(namespace=namespace, kind=EdgeKind.FIRST_STEP, src=proc.id, dst=step.id)],
    )
    out = io.StringIO()
    store.export_jsonl(out, namespace)
    schemas = {k.split(".")[0].removeprefix("export-"): v for k, v in export_schemas().items()}
    kinds = []
    for line in out.getvalue().splitlines():
        record = json.loads(line)
        kind = record["type"]
        kinds.append(kind)
        body = record if kind == "header" else {k: v for k, v in record.items() if k != "type"}
        jsonschema.validate(body, schemas[kind])
    assert kinds.count("node") == 3 and kinds.count("edge") == 1 and kinds[0] == "header"
    bad = {"kind": "Note", "namespace": namespace, "content": 5}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schemas["node"])
