/* jitguard._src._speedups: the slot's fields, the Dispatch struct and its call path
 * (Dispatch_vectorcall: a hit served here, everything else forwarded).
 * Not compiled on its own: speedups.c includes it (one translation unit), before
 * dispatch_type.c.h (the rest of the Dispatch type). */

/* ---- the slot's fields, read through the member descriptors of its __slots__ ---------- */

static PyTypeObject *slot_type = NULL;
static Py_ssize_t off_hits = -1, off_last = -1, off_artifact = -1, off_residual = -1;

static Py_ssize_t
member_offset(PyObject *cls, const char *name)
{
    PyObject *descr = PyObject_GetAttrString(cls, name);
    if (descr == NULL) {
        return -1;
    }
    Py_ssize_t off = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_OBJECT_EX) {
            off = m->offset;
        }
    }
    Py_DECREF(descr);
    if (off < 0) {
        PyErr_Format(PyExc_TypeError, "Slot.%s is not a __slots__ member", name);
    }
    return off;
}

/* set_slot_type(Slot): learn where a slot keeps hits, last, artifact and residual. */
static PyObject *
set_slot_type(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "set_slot_type takes a class");
        return NULL;
    }
    Py_ssize_t h = member_offset(cls, "hits");
    Py_ssize_t l = member_offset(cls, "last");
    Py_ssize_t a = member_offset(cls, "artifact");
    Py_ssize_t r = member_offset(cls, "residual");
    if (h < 0 || l < 0 || a < 0 || r < 0) {
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(slot_type, (PyTypeObject *)cls);
    off_hits = h;
    off_last = l;
    off_artifact = a;
    off_residual = r;
    Py_RETURN_NONE;
}

#define FIELD(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* ---- the dispatch object ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fallback;    /* the generated Python dispatcher */
    PyObject *dict;        /* the fallback's own __dict__, shared */
    PyObject *weakreflist;
    PyObject *default_;    /* the DEFAULT sentinel of the signature */
    PyObject *miss;        /* the miss path (FunctionCache._miss), called with the values */
    Py_ssize_t nargs;      /* the number of (positional) parameters */
    State *state;
    PyObject *watched;     /* the specialized Python function, or NULL */
    PyObject *code;        /* its __code__ when the entries were compiled */
    PyObject *more_watched;  /* a tuple of the functions it wraps, or NULL */
    PyObject *more_codes;    /* a tuple of their __code__ when the entries were compiled */
    PyObject *own_code;      /* the fallback's __code__ when the state was installed, or NULL */
    unsigned long long fast_hits;  /* calls served here */
    unsigned long long forwards;   /* calls forwarded to the Python dispatcher */
} Dispatch;

static PyTypeObject DispatchType;

static PyObject *
forward(Dispatch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    self->forwards++;
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "jitguard: a cleared specialized function was called");
        return NULL;
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* Count a hit on ``slot`` (``s.hits += 1``; ``s.last = tick()`` with maxsize) and call its
 * artifact, as the generated dispatcher does. Steals the references to ``slot`` and ``st``. */
static PyObject *
do_hit(Dispatch *self, State *st, PyObject *slot, PyObject *const *args, size_t nargsf)
{
    PyObject *hits = FIELD(slot, off_hits);
    if (hits == NULL) {
        Py_DECREF(slot);
        Py_DECREF(st);
        PyErr_SetString(PyExc_AttributeError, "'Slot' object has no attribute 'hits'");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    /* The count's own int, held by the slot alone (refcount 1: no other reference, so no
     * code can see it change; a small int is cached, so never 1): add one in place, while it
     * stays one positive digit. It is what ``s.hits += 1`` gives, without an allocation and
     * a free per hit (CPython 3.11's int layout; 3.12 changed it). */
    if (PyLong_CheckExact(hits) && Py_REFCNT(hits) == 1 && Py_SIZE(hits) == 1 &&
        ((PyLongObject *)hits)->ob_digit[0] < PyLong_MASK) {
        ((PyLongObject *)hits)->ob_digit[0] += 1;
        goto counted;
    }
#endif
    PyObject *more;  /* an int's ``+ 1`` runs no user code */
    int overflow = 0;
    long h = PyLong_CheckExact(hits) ? PyLong_AsLongAndOverflow(hits, &overflow) : -1;
    if (PyLong_CheckExact(hits) && !overflow && h < LONG_MAX && !(h == -1 && PyErr_Occurred())) {
        more = PyLong_FromLong(h + 1);
    }
    else {
        PyErr_Clear();
        PyObject *one = PyLong_FromLong(1);
        more = one ? PyNumber_Add(hits, one) : NULL;
        Py_XDECREF(one);
    }
    if (more == NULL) {
        Py_DECREF(slot);
        Py_DECREF(st);
        return NULL;
    }
    PyObject *old = FIELD(slot, off_hits);
    FIELD(slot, off_hits) = more;
    Py_XDECREF(old);
#if PY_VERSION_HEX < 0x030C0000
counted:
#endif
    if (st->tick != NULL) {
        PyObject *when = PyObject_CallNoArgs(st->tick);
        if (when == NULL) {
            Py_DECREF(slot);
            Py_DECREF(st);
            return NULL;
        }
        old = FIELD(slot, off_last);
        FIELD(slot, off_last) = when;
        Py_XDECREF(old);
    }
    Py_DECREF(st);
    PyObject *artifact = FIELD(slot, off_artifact);  /* read now: a kill may have swapped it */
    if (artifact == NULL) {
        Py_DECREF(slot);
        PyErr_SetString(PyExc_AttributeError, "'Slot' object has no attribute 'artifact'");
        return NULL;
    }
    Py_INCREF(artifact);
    Py_DECREF(slot);
    self->fast_hits++;
    PyObject *result = PyObject_Vectorcall(artifact, args, nargsf, NULL);
    Py_DECREF(artifact);
    return result;
}

/* ``r is None or r(*values)`` for a slot: 1, 0, or -1 with an error. */
static int
residual_holds(PyObject *slot, PyObject *const *args, Py_ssize_t nargs)
{
    if (Py_TYPE(slot) != slot_type) {
        PyErr_SetString(PyExc_RuntimeError, "jitguard: the index holds something not a Slot");
        return -1;
    }
    PyObject *r = FIELD(slot, off_residual);
    if (r == Py_None) {
        return 1;
    }
    if (r == NULL) {
        PyErr_SetString(PyExc_AttributeError, "'Slot' object has no attribute 'residual'");
        return -1;
    }
    Py_INCREF(r);
    PyObject *ok = PyObject_Vectorcall(r, args, nargs, NULL);
    Py_DECREF(r);
    if (ok == NULL) {
        return -1;
    }
    int t = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    return t;
}

/* Whether the fallback's own ``__code__`` is not the generated code the state was installed
 * with: a user assigned ``f.__code__`` ([Note: One answer from both modes]), and the
 * fallback runs that code, not the index. A pointer compare. */
static inline int
own_code_replaced(Dispatch *self)
{
    return self->own_code != NULL &&
           ((PyFunctionObject *)self->fallback)->func_code != self->own_code;
}

/* Whether the ``__code__`` of a watched function was replaced ([Note: A replaced
 * __code__]): no code runs, pointer compares only. */
static inline int
code_replaced(Dispatch *self)
{
    if (((PyFunctionObject *)self->watched)->func_code != self->code) {
        return 1;
    }
    if (self->more_watched != NULL) {
        Py_ssize_t n = PyTuple_GET_SIZE(self->more_watched);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *f = PyTuple_GET_ITEM(self->more_watched, i);
            if (((PyFunctionObject *)f)->func_code != PyTuple_GET_ITEM(self->more_codes, i)) {
                return 1;
            }
        }
    }
    return 0;
}

/* ``d[key]`` as a new reference, KeyError as Python raises it. */
static PyObject *
get_item(PyObject *d, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetObject(PyExc_KeyError, key);
        }
        return NULL;
    }
    return Py_NewRef(v);
}

static PyObject *
Dispatch_vectorcall(Dispatch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    State *st = self->state;
    /* A replaced __code__ ([Note: A replaced __code__]): the Python dispatcher sees it. */
    if (st == NULL || st->mode == MODE_FORWARD || nargs != self->nargs || slot_type == NULL ||
        own_code_replaced(self) || (self->watched != NULL && code_replaced(self)) ||
        (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        return forward(self, args, nargsf, kwnames);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (args[i] == self->default_) {
            return forward(self, args, nargsf, kwnames);
        }
    }
    /* The state may be swapped (a publication) by code that runs during an allocation
     * below (a gc pass running finalizers): hold the one this call started with. */
    Py_INCREF(st);
    PyObject *parts[MAX_PARTS];
    Py_ssize_t np = 0;
    PyObject *key = NULL;   /* the call's key (LINEAR when it has none), owned */
    PyObject *slot = NULL;  /* borrowed until taken */
    int nokey = st->mode == MODE_NODIMS;
    for (Py_ssize_t i = 0; !nokey && i < st->ndims; i++) {
        DimSpec *d = &st->dims[i];
        if (d->pos >= nargs) {
            goto out_forward;
        }
        PyObject *v = args[d->pos];
        uintptr_t tp = (uintptr_t)Py_TYPE(v);
        int pass = 1;
        if (d->pre == PRE_IS) {
            pass = tp == d->type;
        }
        else if (d->pre == PRE_SET) {
            Py_ssize_t j = 0;
            while (j < d->ngate && d->gate[j] != tp) {
                j++;
            }
            pass = j < d->ngate;
        }
        if (!pass) {
            if (st->mode == MODE_EXACT) {
                goto out_forward;  /* no entry can hold: the miss path, in Python */
            }
            nokey = 1;  /* "a call of another type has no key": the linear entries */
            break;
        }
        if (d->typed_part) {
            PyObject *part = type_id(v);
            if (part == NULL) {
                goto out_error;
            }
            parts[np++] = part;
        }
        if (d->expr == EXPR_NONE) {
            continue;
        }
        PyObject *part = compute_part(d, v);
        if (part == NOT_NATIVE) {
            goto out_forward;
        }
        if (part == NULL) {
            goto out_error;
        }
        parts[np++] = part;
    }
    if (nokey) {
        key = Py_NewRef(st->linear);
    }
    else if (!(st->mode == MODE_EXACT && st->nested && np > 1)) {
        if (np == 1) {
            key = Py_NewRef(parts[0]);
        }
        else {
            key = PyTuple_New(np);
            if (key == NULL) {
                goto out_error;
            }
            for (Py_ssize_t i = 0; i < np; i++) {
                PyTuple_SET_ITEM(key, i, Py_NewRef(parts[i]));
            }
        }
    }
    /* Every allocation is done: from here to taking the slot no code runs (the keys are
     * ints, builtin scalars and tuples of them, compared without user code). */
    if (key == NULL) {  /* exact and nested: ``I[a][b]`` */
        PyObject *level = st->index;
        for (Py_ssize_t i = 0; i < np; i++) {
            if (!PyDict_CheckExact(level)) {
                goto out_forward;
            }
            level = PyDict_GetItemWithError(level, parts[i]);
            if (level == NULL) {
                PyErr_Clear();
                goto out_forward;
            }
        }
        slot = level;
    }
    else {
        slot = nokey ? NULL : PyDict_GetItemWithError(st->index, key);
        if (slot == NULL) {
            PyErr_Clear();
            if (st->mode == MODE_EXACT) {
                goto out_forward;  /* no entry has this key: the miss path */
            }
            slot = PyDict_GetItemWithError(st->index, st->linear);
            if (slot == NULL) {
                PyErr_Clear();
                goto out_forward;
            }
        }
    }
    if (Py_TYPE(slot) != slot_type) {
        goto out_forward;
    }
    PyObject *res = FIELD(slot, off_residual);
    if (res == NULL || FIELD(slot, off_hits) == NULL) {
        goto out_forward;  /* unset: the Python dispatcher raises as it would */
    }
    Py_INCREF(slot);
    for (Py_ssize_t i = 0; i < np; i++) {
        Py_DECREF(parts[i]);
    }
    np = 0;
    if (st->mode == MODE_EXACT || res == Py_None) {
        Py_XDECREF(key);
        return do_hit(self, st, slot, args, nargsf);  /* a key match proves every guard */
    }
    if (self->miss == NULL) {
        Py_DECREF(slot);
        goto out_forward;
    }
    /* Residual checks: from here on Python code runs, so nothing is forwarded any more (the
     * Python dispatcher would run them again); this is its loop, in C: the first candidate,
     * then the key's followers (``I[FOLLOWERS].get(k) or I[FOLLOWERS][LINEAR]``), then the
     * miss path. */
    int t = residual_holds(slot, args, nargs);
    if (t != 0) {
        Py_DECREF(key);
        if (t < 0) {
            Py_DECREF(slot);
            Py_DECREF(st);
            return NULL;
        }
        return do_hit(self, st, slot, args, nargsf);
    }
    Py_DECREF(slot);
    PyObject *followers = get_item(st->index, st->followers);
    if (followers == NULL) {
        goto out_raise;
    }
    PyObject *cands = NULL;
    if (PyDict_Check(followers)) {
        cands = PyDict_GetItemWithError(followers, key);
        if (cands == NULL && PyErr_Occurred()) {
            Py_DECREF(followers);
            goto out_raise;
        }
        Py_XINCREF(cands);
    }
    else {
        Py_DECREF(followers);
        PyErr_SetString(PyExc_RuntimeError, "jitguard: the index's followers are not a dict");
        goto out_raise;
    }
    int truthy = 0;
    if (cands != NULL) {
        truthy = PyObject_IsTrue(cands);
        if (truthy < 0) {
            Py_DECREF(cands);
            Py_DECREF(followers);
            goto out_raise;
        }
    }
    if (!truthy) {
        Py_XDECREF(cands);
        cands = get_item(followers, st->linear);
        if (cands == NULL) {
            Py_DECREF(followers);
            goto out_raise;
        }
    }
    Py_DECREF(followers);
    PyObject *seq = PySequence_Fast(cands, "jitguard: followers are not a sequence");
    Py_DECREF(cands);
    if (seq == NULL) {
        goto out_raise;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *s = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        t = residual_holds(s, args, nargs);
        if (t != 0) {
            Py_DECREF(seq);
            Py_DECREF(key);
            if (t < 0) {
                Py_DECREF(s);
                Py_DECREF(st);
                return NULL;
            }
            return do_hit(self, st, s, args, nargsf);
        }
        Py_DECREF(s);
    }
    Py_DECREF(seq);
    Py_DECREF(key);
    Py_DECREF(st);
    self->forwards++;  /* to the miss path (counted with the forwards) */
    return PyObject_Vectorcall(self->miss, args, nargsf, NULL);

out_raise:
    Py_DECREF(key);
    Py_DECREF(st);
    return NULL;
out_error:
    /* Only an allocation fails here (MemoryError): forward, and let Python decide. */
    PyErr_Clear();
out_forward:
    for (Py_ssize_t i = 0; i < np; i++) {
        Py_DECREF(parts[i]);
    }
    Py_XDECREF(key);
    Py_DECREF(st);
    return forward(self, args, nargsf, kwnames);
}
