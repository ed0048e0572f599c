"""The descriptor's JSON schema, for editors (`parity-kit schema`).

The loader validates ``cases`` in two steps (the table first, then each case by its backend's
schema) so that its errors can name the case; an editor needs it in one document instead. Here each
case is a union of the registered backends' case schemas, told apart by ``backend``, so a
third-party backend's options complete and validate like the built-in ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, create_model

from kit.descriptor.schema import Descriptor, case_schemas

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
DESCRIPTION = "A parity-kit descriptor: the model, its fixture and goldens, and the cases a gate runs."


def descriptor_json_schema() -> dict[str, Any]:
    """The descriptor's JSON schema (draft 2020-12) for editors: every case one of the registered backends' case
    schemas, chosen by its ``backend`` key."""
    schemas = tuple(case_schemas().values())
    case = schemas[0] if len(schemas) == 1 else Annotated[Union[schemas], Field(discriminator="backend")]
    # The case type is made at run time from the registered backends, which no checker can follow.
    model = create_model("Descriptor", __base__=Descriptor, __doc__=DESCRIPTION,
                         cases=(dict[str, case], Field(min_length=1)))  # type: ignore[valid-type]
    schema = model.model_json_schema()
    return {"$schema": SCHEMA_DIALECT, "title": "parity-kit descriptor", **{k: v for k, v in schema.items()
                                                                              if k != "title"}}
