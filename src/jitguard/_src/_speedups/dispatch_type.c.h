/* jitguard._src._speedups: the Dispatch type around its call path (construction, GC,
 * attributes delegated to the Python dispatcher, _install/_watch/_counts, the type object).
 * Not compiled on its own: speedups.c includes it (one translation unit), after
 * dispatch.c.h (the struct and Dispatch_vectorcall). */

/* ---- the dispatch type --------------------------------------------------------------- */

static PyObject *
Dispatch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *default_, *miss;
    Py_ssize_t nargs;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Dispatch takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OnOO:Dispatch", &fallback, &nargs, &default_, &miss)) {
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "Dispatch: the fallback must be callable");
        return NULL;
    }
    PyObject *dict = PyObject_GetAttrString(fallback, "__dict__");
    if (dict == NULL) {
        return NULL;
    }
    if (!PyDict_Check(dict)) {
        Py_DECREF(dict);
        PyErr_SetString(PyExc_TypeError, "Dispatch: the fallback's __dict__ is not a dict");
        return NULL;
    }
    Dispatch *self = (Dispatch *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(dict);
        return NULL;
    }
    self->vectorcall = (vectorcallfunc)Dispatch_vectorcall;
    self->fallback = Py_NewRef(fallback);
    self->dict = dict;
    self->default_ = Py_NewRef(default_);
    self->miss = Py_NewRef(miss);
    self->nargs = nargs;
    self->state = NULL;
    return (PyObject *)self;
}

static int
Dispatch_traverse(Dispatch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    Py_VISIT(self->dict);
    Py_VISIT(self->default_);
    Py_VISIT(self->miss);
    Py_VISIT(self->state);
    Py_VISIT(self->watched);
    Py_VISIT(self->code);
    Py_VISIT(self->more_watched);
    Py_VISIT(self->more_codes);
    Py_VISIT(self->own_code);
    return 0;
}

static int
Dispatch_clear(Dispatch *self)
{
    Py_CLEAR(self->state);
    Py_CLEAR(self->own_code);
    Py_CLEAR(self->watched);
    Py_CLEAR(self->code);
    Py_CLEAR(self->more_watched);
    Py_CLEAR(self->more_codes);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->default_);
    Py_CLEAR(self->miss);
    return 0;
}

static void
Dispatch_dealloc(Dispatch *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    Dispatch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Dispatch_call(Dispatch *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call((PyObject *)self, args, kwargs);
}

/* A method, like a function: bound to an instance, itself through the class. */
static PyObject *
Dispatch_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

/* Whether ``name`` is one of the fallback function's own attributes ([Note: One answer from
 * both modes]): a data descriptor of its type (``__code__``, ``__defaults__``,
 * ``__kwdefaults__``, ``__annotations__``, ...) that the Dispatch type does not define
 * itself. Those are the fallback's, read and set there, so that a specialized function's
 * attributes are the same object's in both modes. */
static int
fallback_owns(Dispatch *self, PyObject *name)
{
    if (self->fallback == NULL || !PyUnicode_Check(name)) {
        return 0;
    }
    PyObject *descr = _PyType_Lookup(Py_TYPE(self->fallback), name);
    if (descr == NULL || Py_TYPE(descr)->tp_descr_set == NULL) {
        return 0;
    }
    return _PyType_Lookup(Py_TYPE(self), name) == NULL;
}

/* Attributes: the fallback's own (``fallback_owns``); else its own __dict__ (the
 * fallback's), then the fallback's (``__globals__``, ``__closure__``, ...). */
static PyObject *
Dispatch_getattro(Dispatch *self, PyObject *name)
{
    if (fallback_owns(self, name)) {
        return PyObject_GetAttr(self->fallback, name);
    }
    PyObject *found = PyObject_GenericGetAttr((PyObject *)self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError) || self->fallback == NULL) {
        return found;
    }
    PyErr_Clear();
    return PyObject_GetAttr(self->fallback, name);
}

/* Setting (or deleting, ``value`` NULL) one of the fallback's own attributes sets it there,
 * as on the function of the pure-Python mode; anything else goes to the shared __dict__. */
static int
Dispatch_setattro(Dispatch *self, PyObject *name, PyObject *value)
{
    if (fallback_owns(self, name)) {
        return PyObject_SetAttr(self->fallback, name, value);
    }
    return PyObject_GenericSetAttr((PyObject *)self, name, value);
}

static PyObject *
Dispatch_repr(Dispatch *self)
{
    if (self->fallback == NULL) {
        return PyUnicode_FromString("<jitguard dispatch (cleared)>");
    }
    return PyObject_Repr(self->fallback);
}

/* install(state): the layout and index the next calls use (one store), served while the
 * fallback's __code__ is the one it has now (the generated code of that layout). */
static PyObject *
Dispatch_install(Dispatch *self, PyObject *state)
{
    if (state != Py_None && !Py_IS_TYPE(state, &StateType)) {
        PyErr_SetString(PyExc_TypeError, "install takes a State or None");
        return NULL;
    }
    PyObject *code = NULL;
    if (state != Py_None && self->fallback != NULL && PyFunction_Check(self->fallback)) {
        code = Py_NewRef(((PyFunctionObject *)self->fallback)->func_code);
    }
    Py_XSETREF(self->own_code, code);
    PyObject *new = state == Py_None ? NULL : Py_NewRef(state);
    Py_XSETREF(self->state, (State *)new);
    Py_RETURN_NONE;
}

/* _watch(fn, code, more_fns, more_codes): forward every call while ``fn.__code__`` is not
 * ``code``, or the ``__code__`` of a function of the tuple ``more_fns`` (the functions it
 * wraps) is not the code at the same place in ``more_codes``. */
static PyObject *
Dispatch_watch(Dispatch *self, PyObject *args)
{
    PyObject *fn, *code, *more_fns, *more_codes;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:_watch", &PyFunction_Type, &fn, &PyCode_Type, &code,
                          &PyTuple_Type, &more_fns, &PyTuple_Type, &more_codes)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(more_fns);
    if (PyTuple_GET_SIZE(more_codes) != n) {
        PyErr_SetString(PyExc_ValueError, "_watch: one code per function");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyFunction_Check(PyTuple_GET_ITEM(more_fns, i)) ||
            !PyCode_Check(PyTuple_GET_ITEM(more_codes, i))) {
            PyErr_SetString(PyExc_TypeError, "_watch: functions and their code objects");
            return NULL;
        }
    }
    Py_INCREF(fn);
    Py_XSETREF(self->watched, fn);
    Py_INCREF(code);
    Py_XSETREF(self->code, code);
    Py_XSETREF(self->more_watched, n ? Py_NewRef(more_fns) : NULL);
    Py_XSETREF(self->more_codes, n ? Py_NewRef(more_codes) : NULL);
    Py_RETURN_NONE;
}

static PyObject *
Dispatch_counts(Dispatch *self, PyObject *unused)
{
    return Py_BuildValue("(KK)", self->fast_hits, self->forwards);
}

/* Pickled by reference, like a function: ``module.qualname``. */
static PyObject *
Dispatch_reduce(Dispatch *self, PyObject *unused)
{
    return PyObject_GetAttrString((PyObject *)self, "__qualname__");
}

static PyObject *
Dispatch_get_state(Dispatch *self, void *closure)
{
    if (self->state == NULL) {
        Py_RETURN_NONE;
    }
    return Py_NewRef((PyObject *)self->state);
}

static PyObject *
Dispatch_get_fallback(Dispatch *self, void *closure)
{
    if (self->fallback == NULL) {
        Py_RETURN_NONE;
    }
    return Py_NewRef(self->fallback);
}

/* __name__, __qualname__, __doc__, __module__: the fallback's (set by update_wrapper). */
static PyObject *
Dispatch_get_delegated(Dispatch *self, void *closure)
{
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_AttributeError, (const char *)closure);
        return NULL;
    }
    return PyObject_GetAttrString(self->fallback, (const char *)closure);
}

static int
Dispatch_set_delegated(Dispatch *self, PyObject *value, void *closure)
{
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_AttributeError, (const char *)closure);
        return -1;
    }
    return PyObject_SetAttrString(self->fallback, (const char *)closure, value);
}

static PyMethodDef Dispatch_methods[] = {
    {"_install", (PyCFunction)Dispatch_install, METH_O,
     "Publish a State (or None: forward every call)."},
    {"_watch", (PyCFunction)Dispatch_watch, METH_VARARGS,
     "Forward every call while fn.__code__ is not code (or a wrapped function's is not its)."},
    {"_counts", (PyCFunction)Dispatch_counts, METH_NOARGS,
     "(calls served by the C path, calls forwarded to the Python dispatcher)."},
    {"__reduce__", (PyCFunction)Dispatch_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyGetSetDef Dispatch_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"_state", (getter)Dispatch_get_state, NULL, "The State in use (None: forward).", NULL},
    {"_fallback", (getter)Dispatch_get_fallback, NULL, "The Python dispatcher.", NULL},
    {"__name__", (getter)Dispatch_get_delegated, (setter)Dispatch_set_delegated, NULL,
     "__name__"},
    {"__qualname__", (getter)Dispatch_get_delegated, (setter)Dispatch_set_delegated, NULL,
     "__qualname__"},
    {"__doc__", (getter)Dispatch_get_delegated, (setter)Dispatch_set_delegated, NULL,
     "__doc__"},
    {"__module__", (getter)Dispatch_get_delegated, (setter)Dispatch_set_delegated, NULL,
     "__module__"},
    {NULL},
};

static PyTypeObject DispatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitguard._src._speedups.ext.Dispatch",
    .tp_basicsize = sizeof(Dispatch),
    .tp_dealloc = (destructor)Dispatch_dealloc,
    .tp_vectorcall_offset = offsetof(Dispatch, vectorcall),
    .tp_call = (ternaryfunc)Dispatch_call,
    .tp_repr = (reprfunc)Dispatch_repr,
    .tp_getattro = (getattrofunc)Dispatch_getattro,
    .tp_setattro = (setattrofunc)Dispatch_setattro,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A specialized function: the C hot path in front of the generated dispatcher.",
    .tp_traverse = (traverseproc)Dispatch_traverse,
    .tp_clear = (inquiry)Dispatch_clear,
    .tp_weaklistoffset = offsetof(Dispatch, weakreflist),
    .tp_methods = Dispatch_methods,
    .tp_getset = Dispatch_getset,
    .tp_descr_get = Dispatch_descr_get,
    .tp_dictoffset = offsetof(Dispatch, dict),
    .tp_new = Dispatch_new,
};
