/* jitguard._src._speedups: the State type (one snapshot's key layout, as codes, and
 * its index).
 * Not compiled on its own: speedups.c includes it (one translation unit). */

/* ---- the state: one key layout and its index ---------------------------------------- */

static void
free_dim(DimSpec *d)
{
    PyMem_Free(d->gate);
    d->gate = NULL;
    for (Py_ssize_t j = 0; j < d->ndiv; j++) {
        Py_CLEAR(d->divobj[j]);
    }
    d->ndiv = 0;
    if (d->branch != NULL) {
        for (Py_ssize_t j = 0; j < d->nbranch; j++) {
            free_dim(&d->branch[j]);
        }
        PyMem_Free(d->branch);
        d->branch = NULL;
    }
}

static void
State_dealloc(State *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->index);
    Py_CLEAR(self->linear);
    Py_CLEAR(self->followers);
    Py_CLEAR(self->tick);
    if (self->dims != NULL) {
        for (Py_ssize_t i = 0; i < self->ndims; i++) {
            free_dim(&self->dims[i]);
        }
        PyMem_Free(self->dims);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
State_traverse(State *self, visitproc visit, void *arg)
{
    Py_VISIT(self->index);
    Py_VISIT(self->linear);
    Py_VISIT(self->followers);
    Py_VISIT(self->tick);
    return 0;
}

static int
State_clear(State *self)
{
    Py_CLEAR(self->index);
    Py_CLEAR(self->linear);
    Py_CLEAR(self->followers);
    Py_CLEAR(self->tick);
    self->mode = MODE_FORWARD;
    return 0;
}

/* State(mode, nested, index, linear, followers, tick, dims): dims is a tuple of
 * (pos, pre, typed_part, expr, type id or None, tuple of type ids, extra) tuples; extra is
 * (layout, aligned) for EXPR_ARRAY, the divisors for EXPR_INT_CLASS, (align,) for EXPR_PTR,
 * else (). */
static PyObject *
State_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    int mode, nested;
    PyObject *index, *linear, *followers, *tick, *dims;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "State takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "ipO!OOOO!:State", &mode, &nested, &PyDict_Type, &index,
                          &linear, &followers, &tick, &PyTuple_Type, &dims)) {
        return NULL;
    }
    if (mode < MODE_FORWARD || mode > MODE_KEYED) {
        PyErr_SetString(PyExc_ValueError, "State: unknown mode");
        return NULL;
    }
    State *self = (State *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->mode = mode;
    self->nested = nested;
    self->index = Py_NewRef(index);
    self->linear = Py_NewRef(linear);
    self->followers = Py_NewRef(followers);
    self->tick = tick == Py_None ? NULL : Py_NewRef(tick);
    Py_ssize_t n = PyTuple_GET_SIZE(dims);
    self->dims = PyMem_Calloc(n ? n : 1, sizeof(DimSpec));
    if (self->dims == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->ndims = n;
    Py_ssize_t parts = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        DimSpec *d = &self->dims[i];
        PyObject *t, *gate, *extra;
        PyObject *spec = PyTuple_GET_ITEM(dims, i);
        if (!PyTuple_Check(spec) ||
            !PyArg_ParseTuple(spec, "niiiOO!O!:dim", &d->pos, &d->pre, &d->typed_part,
                              &d->expr, &t, &PyTuple_Type, &gate, &PyTuple_Type, &extra)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "State: a dim is a tuple");
            }
            Py_DECREF(self);
            return NULL;
        }
        if (d->pos < 0 || d->pre < PRE_NONE || d->pre > PRE_SET || d->expr < EXPR_NONE ||
            d->expr > EXPR_LAST) {
            PyErr_SetString(PyExc_ValueError, "State: bad dim");
            Py_DECREF(self);
            return NULL;
        }
        if (parse_extra(d, extra) < 0) {
            Py_DECREF(self);
            return NULL;
        }
        if (d->pre == PRE_IS) {
            d->type = as_address(t);
            if (PyErr_Occurred()) {
                Py_DECREF(self);
                return NULL;
            }
        }
        Py_ssize_t ng = PyTuple_GET_SIZE(gate);
        d->ngate = ng;
        d->gate = PyMem_Calloc(ng ? ng : 1, sizeof(uintptr_t));
        if (d->gate == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t j = 0; j < ng; j++) {
            d->gate[j] = as_address(PyTuple_GET_ITEM(gate, j));
            if (PyErr_Occurred()) {
                Py_DECREF(self);
                return NULL;
            }
        }
        parts += (d->typed_part != 0) + (d->expr != EXPR_NONE);
    }
    if (parts > MAX_PARTS) {
        self->mode = MODE_FORWARD;
    }
    self->nparts = parts;
    return (PyObject *)self;
}

static PyObject *
State_get_mode(State *self, void *closure)
{
    return PyLong_FromLong(self->mode);
}

static PyGetSetDef State_getset[] = {
    {"mode", (getter)State_get_mode, NULL, "0: forward every call, 1: no dims, 2: exact, 3: keyed", NULL},
    {NULL},
};

static PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitguard._src._speedups.ext.State",
    .tp_basicsize = sizeof(State),
    .tp_dealloc = (destructor)State_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One snapshot's key layout, as codes, and its index.",
    .tp_traverse = (traverseproc)State_traverse,
    .tp_clear = (inquiry)State_clear,
    .tp_getset = State_getset,
    .tp_new = State_new,
};
