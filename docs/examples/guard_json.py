"""A compiled guard set written as JSON, read back, and compiled again without a frame."""

import json

import jitguard as jg
from jitguard import GuardBuilder as GB
from jitguard import LocalSource


class Config:
    pass


frame = {"n": 7, "mode": ("fast", 2), "cfg": Config(), "opts": {"depth": 3}}
check = jg.compile_guards(
    [
        LocalSource("n").make_guard(GB.EQUALS_MATCH),
        LocalSource("mode").make_guard(GB.EQUALS_MATCH),
        LocalSource("cfg").make_guard(GB.TYPE_MATCH),
        LocalSource("cfg").make_guard(GB.ID_MATCH),
        LocalSource("opts").make_guard(GB.DICT_KEYS_MATCH),
    ],
    f_locals=frame,
)
text = jg.guards_to_json(check, indent=1)
doc = json.loads(text)
print(f"schema_version {doc['schema_version']}, {len(doc['guards'])} guards, {len(text)} bytes")
for g in doc["guards"]:
    status = "portable" if g["portable"] else f"NOT portable: {g['reason']}"
    print(f"  {g['kind']:<16} {g['code']:<45} {status}")
print("the TYPE_MATCH guard as written:")
print(json.dumps(next(g for g in doc["guards"] if g["kind"] == "TYPE_MATCH"), indent=1))

records = jg.import_guards(text)
portable = [r for r in records if r.portable]
rebuilt = jg.compile_guard_records(portable)
print("rebuilt check accepts the frame:", rebuilt(frame))
print("and rejects n=8:", [str(f) for f in rebuilt.explain({**frame, "n": 8})])
try:
    jg.compile_guard_records(records)
except jg.GuardSchemaError as e:
    print("compiling every record:", e)
