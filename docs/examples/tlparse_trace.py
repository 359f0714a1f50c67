"""Trace a program's compiles with JITGUARD_TRACE, then render the trace with tlparse."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

PROGRAM = '''
import jitguard as jg

@jg.specialize
def scale(x, k):
    return x * k

scale(1.0, 2)     # compiles 0/0
scale(1.0, 3)     # k changed: recompiles 0/1, k becomes dynamic
scale(1.0, 4)     # hit
scale(2, 3)       # x is an int now: recompiles 0/2
'''

work = pathlib.Path(tempfile.mkdtemp(prefix="jitguard-trace-"))
(work / "program.py").write_text(PROGRAM)
env = {**os.environ, "JITGUARD_TRACE": str(work / "trace")}
subprocess.run([sys.executable, "program.py"], cwd=work, env=env, check=True)
(trace,) = (work / "trace").iterdir()
print("trace file:", trace.name, f"({len(trace.read_text().splitlines())} lines)")

tlparse = shutil.which("tlparse", path=os.path.dirname(sys.executable)) or "tlparse"
subprocess.run(
    [tlparse, str(trace), "-o", str(work / "tl_out"), "--overwrite", "--no-browser"],
    check=True, capture_output=True,
)
directory = json.loads((work / "tl_out" / "compile_directory.json").read_text())
for compile_id, entry in directory.items():
    names = [artifact["name"] for artifact in entry["artifacts"]]
    print(f"{compile_id}: {', '.join(names)}")
index = (work / "tl_out" / "index.html").read_text()
print("index.html lists every compile id:", all(cid in index for cid in directory))
last = directory["[0/2]"]["artifacts"]
reasons = next(a for a in last if a["name"].startswith("recompile_reasons"))
print("why 0/2 was compiled:", json.loads((work / "tl_out" / reasons["url"]).read_text()))
shutil.rmtree(work)
