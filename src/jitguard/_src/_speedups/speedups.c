/* jitguard._src._speedups: the optional C hot path of the specializing cache.
 *
 * On the CPython API alone (no numpy headers). See [Note: The C hot path] in
 * jitguard/_src/dispatch/fast.py: a ``Dispatch`` object is the specialized function when
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
 *   speedups.h         the shared codes and types;
 *   facts.c.h          key parts computed from a value (array facts, int classes);
 *   state.c.h          the State type;
 *   dispatch.c.h       the slot's fields, the Dispatch struct and its call path;
 *   dispatch_type.c.h  the rest of the Dispatch type;
 *   this file          the helpers of generated checks over a batch of guards
 *                      (dicts_lack, distinct, keys_are, attrs_falsy, dicts_exclude) and the
 *                      module.
 * setup.py lists the parts as the extension's depends (a change to any rebuilds it), and
 * the Makefile as prerequisites of the install.
 */
#include "speedups.h"
#include "facts.c.h"
#include "state.c.h"
#include "dispatch.c.h"
#include "dispatch_type.c.h"

/* ---- helpers of generated checks ([Note: Batched leaves], compiler/bulk.py) ----------- */

/* 1 when some name of the tuple ``attrs`` is in ``d``, 0 when none is, -1 with an exception
 * set: by the dict's own lookup when ``by_dict`` (a dict subclass's ``__contains__`` is not
 * run), else by the ``in`` operator. */
static int
any_name_in(PyObject *d, PyObject *attrs, int by_dict)
{
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(attrs); j++) {
        PyObject *name = PyTuple_GET_ITEM(attrs, j);
        int has = by_dict ? PyDict_Contains(d, name) : PySequence_Contains(d, name);
        if (has != 0) {
            return has;
        }
    }
    return 0;
}

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
        int has = PyDict_GET_SIZE(d) != 0 ? any_name_in(d, attrs, 1) : 0;
        Py_DECREF(d);
        if (has != 0) {
            if (has < 0) {
                return NULL;
            }
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

/* distinct(*values): True when no two values are the same object (compared by address,
 * no user code runs). bulk.distinct is its meaning, in Python. A few values are compared
 * pairwise; more go through an open-addressing table of addresses, twice their number. */
#define JG_DISTINCT_PAIRWISE 16
static PyObject *
py_distinct(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs <= JG_DISTINCT_PAIRWISE) {
        for (Py_ssize_t i = 1; i < nargs; i++) {
            for (Py_ssize_t j = 0; j < i; j++) {
                if (args[i] == args[j]) {
                    Py_RETURN_FALSE;
                }
            }
        }
        Py_RETURN_TRUE;
    }
    size_t size = 64;
    while (size < (size_t)nargs * 2) {
        size <<= 1;
    }
    PyObject *small[128];
    PyObject **table = size <= 128 ? small : PyMem_Calloc(size, sizeof(PyObject *));
    if (table == NULL) {
        return PyErr_NoMemory();
    }
    if (table == small) {
        memset(small, 0, sizeof(small));
    }
    size_t mask = size - 1;
    int ok = 1;
    for (Py_ssize_t i = 0; i < nargs && ok; i++) {
        PyObject *v = args[i];
        size_t h = ((size_t)(uintptr_t)v >> 4) * (size_t)0x9E3779B97F4A7C15ULL;
        for (size_t k = (h >> 7) & mask;; k = (k + 1) & mask) {
            if (table[k] == NULL) {
                table[k] = v;
                break;
            }
            if (table[k] == v) {
                ok = 0;
                break;
            }
        }
    }
    if (table != small) {
        PyMem_Free(table);
    }
    return PyBool_FromLong(ok);
}

/* keys_are(d, keys): True when ``d`` is a dict whose keys, in ``dict.keys`` order (the
 * underlying dict's, whatever a subclass overrides), are ``keys`` (a tuple) one for one: the
 * same object, or of the same exact type and equal. A key pair of another type is compared
 * with ``==``; the generated checks pass only keys of builtin types whose ``==`` is exact and
 * runs no Python code (DICT_KEYS_MATCH), and each pair is held while it is compared, so a
 * comparison that changed the dict cannot free a key under it. bulk.keys_are is its
 * meaning, in Python. */
static PyObject *
py_keys_are(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keys_are(d, keys: tuple)");
        return NULL;
    }
    PyObject *d = args[0], *keys = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    if (!PyDict_Check(d) || PyDict_GET_SIZE(d) != n) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (i >= n) {  /* changed under a comparison */
            Py_RETURN_FALSE;
        }
        PyObject *want = PyTuple_GET_ITEM(keys, i++);
        if (key == want) {
            continue;
        }
        if (Py_TYPE(key) != Py_TYPE(want)) {
            Py_RETURN_FALSE;
        }
        Py_INCREF(key);
        int eq = PyObject_RichCompareBool(key, want, Py_EQ);
        Py_DECREF(key);
        if (eq <= 0) {
            if (eq < 0) {
                return NULL;
            }
            Py_RETURN_FALSE;
        }
        if (PyDict_GET_SIZE(d) != n) {
            Py_RETURN_FALSE;
        }
    }
    return PyBool_FromLong(i == n);
}

/* attrs_falsy(names, *values): True when ``getattr(values[i], names[i])`` is false for every
 * i, read and tested in order, stopping at the first true one; an exception of a read or a
 * truth test propagates. ``names`` is a tuple of str, one per value. Each read is
 * read_attr: what a Python attribute read gives (a class's data descriptor,
 * ``__getattribute__`` or ``__getattr__`` runs as it would), the instance dict's item read
 * directly where that is what the generic lookup would return; the test is the ``or``
 * chain's truth test. bulk.attrs_falsy is its meaning, in Python. */
static getattrofunc getattr_hook;  /* the tp_getattro of a class with a Python __getattr__ */
static PyObject *str_getattribute;  /* "__getattribute__" */

/* Whether attribute reads on instances of ``tp`` are object's generic lookup: its
 * tp_getattro is PyObject_GenericGetAttr, or the hook a class with ``__getattr__`` gets,
 * which runs the generic lookup first when the class's ``__getattribute__`` is object's
 * (the test CPython's hook makes itself), and ``__getattr__`` only after it failed. */
static int
generic_getattr(PyTypeObject *tp)
{
    if (tp->tp_getattro == PyObject_GenericGetAttr) {
        return 1;
    }
    if (getattr_hook == NULL || tp->tp_getattro != getattr_hook) {
        return 0;
    }
    PyObject *ga = _PyType_Lookup(tp, str_getattribute);
    return ga != NULL && Py_IS_TYPE(ga, &PyWrapperDescr_Type) &&
           ((PyWrapperDescrObject *)ga)->d_wrapped == (void *)PyObject_GenericGetAttr;
}

/* What read_attr learned of the last type it read from, while that type's version tag is
 * the same: CPython gives a type a new tag whenever it or a class of its MRO is modified
 * (an attribute set or deleted, ``__bases__`` assigned), the invariant its own method cache
 * and inline caches rest on; so a ``__getattribute__`` or a class attribute added by code
 * that ran in between (a dict key's ``__eq__``, a truth test) is seen. A type without a
 * valid tag is not cached. */
typedef struct {
    PyTypeObject *tp;
    unsigned int tag;
    int generic;          /* generic_getattr(tp) */
    PyObject *name;       /* the last name looked up in tp's MRO */
    int unclaimed;        /* no class of tp's MRO has ``name`` */
} ReadCache;

static inline int
cache_holds(const ReadCache *rc, PyTypeObject *tp)
{
    return tp == rc->tp && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) &&
           tp->tp_version_tag == rc->tag;
}

/* ``getattr(v, name)`` (a new reference, or NULL with an exception set). Where the generic
 * lookup would find ``name`` in the instance dict (the type's lookup is generic and no
 * class of its MRO has ``name``, so no descriptor comes first), it is that dict's item,
 * read as the generic lookup reads it; anything else (a class attribute or descriptor of
 * that name, a ``__getattribute__`` override, no instance dict, the name not in it) is
 * PyObject_GetAttr itself. */
static PyObject *
read_attr(PyObject *v, PyObject *name, ReadCache *rc)
{
    PyTypeObject *tp = Py_TYPE(v);
    if (!PyUnicode_CheckExact(name)) {
        return PyObject_GetAttr(v, name);
    }
    if (!cache_holds(rc, tp)) {
        rc->tp = NULL;
        rc->generic = generic_getattr(tp);
        rc->unclaimed = rc->generic && _PyType_Lookup(tp, name) == NULL;
        rc->name = name;
        if (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) {
            rc->tp = tp;
            rc->tag = tp->tp_version_tag;
        }
    }
    else if (rc->generic && name != rc->name) {
        rc->unclaimed = _PyType_Lookup(tp, name) == NULL;
        rc->name = name;
        if (!cache_holds(rc, tp)) {  /* the lookup assigned no tag: forget the type */
            rc->tp = NULL;
        }
    }
    if (rc->generic && rc->unclaimed) {
        PyObject **dictptr = _PyObject_GetDictPtr(v);
        if (dictptr != NULL && *dictptr != NULL && PyDict_Check(*dictptr)) {
            PyObject *found = PyDict_GetItemWithError(*dictptr, name);
            if (found != NULL) {
                return Py_NewRef(found);
            }
            if (PyErr_Occurred()) {
                return NULL;
            }
        }
    }
    return PyObject_GetAttr(v, name);
}

static PyObject *
py_attrs_falsy(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != nargs - 1) {
        PyErr_SetString(PyExc_TypeError, "attrs_falsy(names: tuple, *values), a name per value");
        return NULL;
    }
    PyObject *names = args[0];
    ReadCache rc = {NULL, 0, 0, NULL, 0};
    for (Py_ssize_t i = 1; i < nargs; i++) {
        PyObject *v = read_attr(args[i], PyTuple_GET_ITEM(names, i - 1), &rc);
        if (v == NULL) {
            return NULL;
        }
        /* an exact dict's or OrderedDict's truth is its size (no code of the program) */
        int truth = (PyDict_CheckExact(v) || PyODict_CheckExact(v)) ? PyDict_GET_SIZE(v) != 0
                                                                    : PyObject_IsTrue(v);
        Py_DECREF(v);
        if (truth != 0) {
            if (truth < 0) {
                return NULL;
            }
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static PyObject *str_dict;  /* "__dict__" */

/* dicts_exclude(attrs, *values): True when, for every i, no name of ``attrs[i]`` (a tuple
 * of str) is ``in`` the instance dict of values[i], as ``object.__getattribute__(v,
 * '__dict__')`` reads it (PyObject_GenericGetAttr: a type's own ``__getattribute__`` is not
 * run) and the ``in`` operator tests it; an exception (a value without an instance dict)
 * propagates. bulk.dicts_exclude is its meaning, in Python. */
static PyObject *
py_dicts_exclude(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != nargs - 1) {
        PyErr_SetString(PyExc_TypeError, "dicts_exclude(attrs: tuple, *values), attrs per value");
        return NULL;
    }
    PyObject *per_value = args[0];
    for (Py_ssize_t i = 1; i < nargs; i++) {
        PyObject *attrs = PyTuple_GET_ITEM(per_value, i - 1);
        if (!PyTuple_CheckExact(attrs)) {
            PyErr_SetString(PyExc_TypeError, "dicts_exclude: each attrs must be a tuple");
            return NULL;
        }
        PyObject *d = PyObject_GenericGetAttr(args[i], str_dict);
        if (d == NULL) {
            return NULL;
        }
        int has = any_name_in(d, attrs, 0);
        Py_DECREF(d);
        if (has != 0) {
            if (has < 0) {
                return NULL;
            }
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

/* The tp_getattro CPython gives a class that defines ``__getattr__`` (and not
 * ``__getattribute__``): read from a probe class made here, so no private symbol is named. */
static int
learn_getattr_hook(void)
{
    PyObject *builtins = PyEval_GetBuiltins();  /* borrowed */
    PyObject *fn = builtins != NULL ? PyDict_GetItemString(builtins, "getattr") : NULL;
    if (fn == NULL) {
        return 0;  /* no fast path: every read is PyObject_GetAttr */
    }
    PyObject *probe = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O){sO}", "_probe",
                                            (PyObject *)&PyBaseObject_Type, "__getattr__", fn);
    if (probe == NULL) {
        return -1;
    }
    getattr_hook = ((PyTypeObject *)probe)->tp_getattro;
    if (getattr_hook == PyObject_GenericGetAttr) {
        getattr_hook = NULL;
    }
    Py_DECREF(probe);
    return 0;
}

/* ---- the module ---------------------------------------------------------------------- */

#include "tags.c.h"

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
    {"distinct", (PyCFunction)(void (*)(void))py_distinct, METH_FASTCALL,
     "distinct(*values): no two values are the same object."},
    {"keys_are", (PyCFunction)(void (*)(void))py_keys_are, METH_FASTCALL,
     "keys_are(d, keys): d is a dict whose keys, in order, are keys (same type, equal)."},
    {"attrs_falsy", (PyCFunction)(void (*)(void))py_attrs_falsy, METH_FASTCALL,
     "attrs_falsy(names, *values): getattr(values[i], names[i]) is false for every i."},
    {"dicts_exclude", (PyCFunction)(void (*)(void))py_dicts_exclude, METH_FASTCALL,
     "dicts_exclude(attrs, *values): no name of attrs[i] is in values[i]'s instance dict."},
    JG_TAGS_METHODS
    {NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "jitguard._src._speedups.ext",
    .m_doc = "The optional C hot path of jitguard's specializing cache.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit_ext(void)
{
    if (PyType_Ready(&StateType) < 0 || PyType_Ready(&DispatchType) < 0) {
        return NULL;
    }
#ifdef JG_HAVE_TAGS
    if (PyType_Ready(&TagSnapshotType) < 0) {
        return NULL;
    }
    tags_empty_slot = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (tags_empty_slot == NULL) {
        return NULL;
    }
    if (tags_learn_members() < 0) {
        return NULL;
    }
#endif
    str_C = PyUnicode_InternFromString("C");
    str_F = PyUnicode_InternFromString("F");
    str_A = PyUnicode_InternFromString("A");
    str_i32 = PyUnicode_InternFromString("i32");
    str_i64 = PyUnicode_InternFromString("i64");
    str_u64 = PyUnicode_InternFromString("u64");
    str_dict = PyUnicode_InternFromString("__dict__");
    str_getattribute = PyUnicode_InternFromString("__getattribute__");
    if (!str_C || !str_F || !str_A || !str_i32 || !str_i64 || !str_u64 || !str_dict ||
        !str_getattribute) {
        return NULL;
    }
    if (learn_getattr_hook() < 0) {
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
#ifdef JG_HAVE_TAGS
    if (PyModule_AddObjectRef(m, "TagSnapshot", (PyObject *)&TagSnapshotType) < 0 ||
        PyModule_AddObjectRef(m, "EMPTY_SLOT", tags_empty_slot) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *member_slots = tags_member_slots();
    if (member_slots == NULL || PyModule_AddObjectRef(m, "MEMBER_SLOTS", member_slots) < 0) {
        Py_XDECREF(member_slots);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(member_slots);
#endif
    return m;
}
