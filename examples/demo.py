"""A tour of jitguard: `make demo`.

Each section prints real output of the library; nothing here is canned.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys
import traceback

import jitguard as jg
from jitguard import GuardBuilder as GB


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def tour_model() -> None:
    section("1. The data model (the specification's names)")
    cid = jg.CompileId(frame_id=0, frame_compile_id=1)
    print("CompileId:", cid, "| parsed back:", jg.CompileId.from_string(str(cid)) == cid)
    print("compiled autograd forms:", jg.CompileId.from_string("!3"), jg.CompileId.from_string("!3/1/2"))
    print("TraceId after two restarts:", jg.TraceId(cid, 2))
    try:
        jg.CompileId.from_string("0/1\n")
    except ValueError as e:
        print("rejected:", e)

    x = jg.LocalSource("x")
    for src in (
        x,
        jg.AttrSource(jg.GlobalSource("cfg"), "lr"),
        jg.GetItemSource(jg.LocalSource("d"), "key"),
        jg.TensorPropertySource(
            jg.AttrSource(jg.GetItemSource(jg.AttrSource(jg.LocalSource("self"), "layers"), 0), "weight"),
            jg.TensorProperty.SIZE,
            1,
        ),
        jg.AttrSource(x, "a-b\n"),
        jg.ConstDictKeySource(jg.LocalSource("d"), 0),
    ):
        print(f"  {type(src).__name__:<22} {src.name():<45} {src.guard_source().name}")

    section("2. Guards installed while tracing, with where they were installed")
    ctx = jg.TracingContext(None)
    with jg.compile_context(jg.CompileContext(cid)), jg.tracing(ctx):
        jg.TracingContext.set_current_loc("model.py", 12, "forward")
        guards = ctx.guards_context.dynamo_guards
        guards.add(x.make_guard(GB.TYPE_MATCH))
        guards.add(x.make_guard(GB.TYPE_MATCH))  # equal guard: kept once
        print("guards:", len(guards), "| trace id:", jg.CompileContext.current_trace_id())
        g = next(iter(guards))
        print("the guard:", g)
        print("user stack:", "".join(g.user_stack.format()).strip())
        print("installed at (formatted only now):", g.stack.format()[-1].strip().splitlines()[0])


class Config:
    def __init__(self, lr: float, layers: list[int]) -> None:
        self.lr = lr
        self.layers = layers


def tour_compiler() -> None:
    section("3. Compiling guards into one check function")
    cfg = Config(0.1, [64, 64])
    f_locals = {"n": 7, "cfg": cfg, "opts": {"mode": "fast", "depth": 2}}
    n, c, o = (jg.LocalSource(k) for k in ("n", "cfg", "opts"))
    guards = [
        n.make_guard(GB.EQUALS_MATCH),
        c.make_guard(GB.TYPE_MATCH),
        jg.AttrSource(c, "lr").make_guard(GB.EQUALS_MATCH),
        jg.AttrSource(c, "layers").make_guard(GB.SEQUENCE_LENGTH),
        o.make_guard(GB.DICT_KEYS_MATCH),
        jg.GetItemSource(o, "mode").make_guard(GB.EQUALS_MATCH),
        o.make_guard(functools.partial(GB.DICT_CONTAINS, key="debug", invert=True)),
        jg.Guard(jg.GlobalStateSource(), GB.GLOBAL_STATE),
    ]
    check = jg.compile_guards(guards, f_locals=f_locals, arg_names=("n", "cfg", "opts"), name="train_step")
    print("the guards, compiled (str(guard) is one line):")
    for guard in check.guards:
        print("  ", guard)
    print(check.source)
    print("same values   ->", check.fn(7, cfg, f_locals["opts"]))
    print("n = 8         ->", check.fn(8, cfg, f_locals["opts"]))
    print("why:")
    for failure in check.explain(8, {"lr": 0.1}, {"mode": "slow"}):
        print("  -", failure)

    section("4. Identity guards never outlive their object")

    class Local:  # a local class: held weakly by the check
        pass

    obj = Local()
    check = jg.compile_guards([jg.LocalSource("o").make_guard(GB.ID_MATCH)], f_locals={"o": obj}, arg_names=("o",))
    print("before:", check, "->", check.fn(obj))
    del obj
    print("after :", check)

    section("5. Generated code is debuggable")
    bad = jg.compile_guards([jg.AttrSource(jg.LocalSource("cfg"), "lr").make_guard(GB.EQUALS_MATCH)], f_locals={"cfg": cfg}, arg_names=("cfg",), name="lr_check")
    print("reading a missing attribute is a failed guard, not an exception:", bad.fn(object()))
    import inspect

    print(f"inspect/pdb/tracebacks see the source as {bad.filename}:")
    print(inspect.getsource(bad.fn))


TOURS = {
    "demo.py": "the data model and the guard compiler",
    "demo_cache.py": "the specializing cache, jitguard.specialize",
    "demo_torch.py": "jitguard.torch.compile",
}


def tour_title(path: str) -> None:
    """A banner naming the tour before its sections (each tour numbers its own from 1)."""
    n = list(TOURS).index(path) + 1
    print(f"\n{'#' * 78}\n# Tour {n} of {len(TOURS)}: {TOURS[path]} (examples/{path})\n{'#' * 78}")


def tour_optional(name: str, path: str) -> None:
    """Run another example file if it exists (the cache and torch tours)."""
    file = pathlib.Path(__file__).with_name(path)
    if not file.exists():
        return
    tour_title(path)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        if hasattr(module, "main"):
            module.main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)


def main() -> None:
    tour_title("demo.py")
    tour_model()
    tour_compiler()
    tour_optional("demo_cache", "demo_cache.py")
    tour_optional("demo_torch", "demo_torch.py")


if __name__ == "__main__":
    main()
