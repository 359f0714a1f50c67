/* jitguard._src._speedups: the optional C hot path of the specializing cache.
 *
 * On the CPython API alone (no numpy headers). See [Note: The C hot path] in
 * jitguard/_src/cache/fast.py: a ``Dispatch`` object is the specialized function when
 * the extension is there. It holds the generated Python dispatcher (``fallback``, the
 * single source of truth) and a ``State`` (the snapshot's key layout, compiled to codes,
 * and the snapshot's index dict itself, shared with the Python dispatcher so that an
 * update in place is seen by both). A call with exactly the positional parameters whose
 * key it can compute without running any code of the values' types, and whose slot needs
 * no residual check, is served here: count the hit, call the artifact. Everything else
 * (keywords, another argument count, the DEFAULT sentinel, a failed precondition, a miss, a
 * slot with a residual, a layout the State cannot express) is forwarded, arguments
 * untouched, to the Python dispatcher, which decides from scratch. Nothing done here
 * before a forward is visible: no user code runs, no counter moves.
 *
 * One translation unit, in parts (so that the hot path still inlines across them):
 *   _speedups.h             the shared codes and types;
 *   _speedups_facts.c.h     key parts computed from a value (array facts, int classes);
 *   _speedups_state.c.h     the State type;
 *   _speedups_dispatch.c.h  the slot's fields, the Dispatch struct and its call path;
 *   _speedups_dispatch_type.c.h  the rest of the Dispatch type;
 *   this file               the module.
 * setup.py lists the parts as the extension's depends (a change to any rebuilds it), and
 * the Makefile as prerequisites of the install.
 */
#include "_speedups.h"
#include "_speedups_facts.c.h"
#include "_speedups_state.c.h"
#include "_speedups_dispatch.c.h"
#include "_speedups_dispatch_type.c.h"

/* ---- helpers of generated checks ([Note: Batched leaves], compiler/bulk.py) ----------- */

/* dicts_lack(attrs, *values): True when no value's instance dict holds a key of ``attrs``
 * (a tuple of str); False for a value with no instance dict. bulk.dicts_lack is its
 * meaning, in Python. */
static PyObject *
py_dicts_lack(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyTuple_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "dicts_lack(attrs: tuple, *values)");
        return NULL;
    }
    PyObject *attrs = args[0];
    Py_ssize_t nattrs = PyTuple_GET_SIZE(attrs);
    for (Py_ssize_t i = 1; i < nargs; i++) {
        PyObject *d = PyObject_GenericGetDict(args[i], NULL);
        if (d == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                return NULL;
            }
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        if (!PyDict_Check(d)) {
            Py_DECREF(d);
            Py_RETURN_FALSE;
        }
        if (PyDict_GET_SIZE(d) != 0) {
            for (Py_ssize_t j = 0; j < nattrs; j++) {
                int has = PyDict_Contains(d, PyTuple_GET_ITEM(attrs, j));
                if (has != 0) {
                    Py_DECREF(d);
                    if (has < 0) {
                        return NULL;
                    }
                    Py_RETURN_FALSE;
                }
            }
        }
        Py_DECREF(d);
    }
    Py_RETURN_TRUE;
}

/* ---- the module ---------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"set_slot_type", set_slot_type, METH_O,
     "Learn where the cache's Slot class keeps hits, last, artifact and residual."},
    {"set_array_support", set_array_support, METH_VARARGS,
     "Read numpy arrays' struct fields, once they agree with numpy's answers on a probe."},
    {"array_fact", py_array_fact, METH_VARARGS,
     "array_fact(x, layout=True, aligned=False) as the C path computes it (LookupError: forwarded)."},
    {"array_token", py_array_token, METH_VARARGS,
     "array_token(x, layout=True, aligned=False) as the C path computes it (LookupError: forwarded)."},
    {"dtype_key", py_dtype_key, METH_O,
     "dtype_key(d) as the C path computes it (LookupError: forwarded)."},
    {"clear_tokens", py_clear_tokens, METH_NOARGS,
     "Empty the C path's own table of array tokens (it fills again from array_facts')."},
    {"int_class", py_int_class, METH_VARARGS,
     "int_class(x, divisors=(16,)) as the C path computes it (LookupError: forwarded)."},
    {"data_ptr_aligned", py_data_ptr_aligned, METH_VARARGS,
     "data_ptr_aligned(x, align=16) as the C path computes it (LookupError: forwarded)."},
    {"dicts_lack", (PyCFunction)(void (*)(void))py_dicts_lack, METH_FASTCALL,
     "dicts_lack(attrs, *values): no value's instance dict holds a key of attrs."},
    {NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "jitguard._src._speedups",
    .m_doc = "The optional C hot path of jitguard's specializing cache.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&StateType) < 0 || PyType_Ready(&DispatchType) < 0) {
        return NULL;
    }
    str_C = PyUnicode_InternFromString("C");
    str_F = PyUnicode_InternFromString("F");
    str_A = PyUnicode_InternFromString("A");
    str_i32 = PyUnicode_InternFromString("i32");
    str_i64 = PyUnicode_InternFromString("i64");
    str_u64 = PyUnicode_InternFromString("u64");
    if (!str_C || !str_F || !str_A || !str_i32 || !str_i64 || !str_u64) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "State", (PyObject *)&StateType) < 0 ||
        PyModule_AddObjectRef(m, "Dispatch", (PyObject *)&DispatchType) < 0 ||
        PyModule_AddIntConstant(m, "MAX_PARTS", MAX_PARTS) < 0 ||
        PyModule_AddIntConstant(m, "ABI", SPEEDUPS_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
