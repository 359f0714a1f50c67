"""Guard sets as JSON: exporting, importing and compiling guard-set documents, and the
schema they follow (docs: API, Guard sets as JSON).

Re-exports only; the code lives in ``jitguard._src``. Every name here is also importable
from ``jitguard`` itself, the same object ([Note: Public submodules] in ``jitguard``).

May import: jitguard._src.
"""

from ._src.compiler.schema import GUARD_SCHEMA_VERSION as GUARD_SCHEMA_VERSION
from ._src.compiler.schema import GuardRecord as GuardRecord
from ._src.compiler.schema import NotPortable as NotPortable
from ._src.compiler.schema import compile_guard_records as compile_guard_records
from ._src.compiler.schema import export_guards as export_guards
from ._src.compiler.schema import guard_schema as guard_schema
from ._src.compiler.schema import guards_to_json as guards_to_json
from ._src.compiler.schema import import_guards as import_guards
from ._src.compiler.schema import register_schema_type as register_schema_type

__all__ = [
    "GUARD_SCHEMA_VERSION",
    "GuardRecord",
    "NotPortable",
    "compile_guard_records",
    "export_guards",
    "guard_schema",
    "guards_to_json",
    "import_guards",
    "register_schema_type",
]
