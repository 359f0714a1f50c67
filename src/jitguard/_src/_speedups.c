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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#ifdef Py_GIL_DISABLED
#error "jitguard._speedups relies on the GIL; the free-threaded build uses pure Python"
#endif

#define MAX_PARTS 64
/* What cache/fast.py expects (ABI there): a stale build of another version is not used. */
#define SPEEDUPS_ABI 4

/* ---- the state: one key layout and its index ---------------------------------------- */

enum { MODE_FORWARD = 0, MODE_NODIMS = 1, MODE_EXACT = 2, MODE_KEYED = 3 };
enum { PRE_NONE = 0, PRE_IS = 1, PRE_SET = 2 };
enum {
    EXPR_NONE = 0, EXPR_VALUE = 1, EXPR_ID = 2, EXPR_LEN = 3,
    EXPR_ARRAY = 4,      /* array_fact(v, layout, aligned), natively for numpy arrays */
    EXPR_INT_CLASS = 5,  /* int_class(v, divisors) */
    EXPR_PTR = 6,        /* data_ptr_aligned(v, align), natively for exact numpy arrays */
    EXPR_UNION = 7,      /* a union dim: per type, (id(type), its fact) or the id alone */
};
#define EXPR_LAST EXPR_UNION
#define MAX_DIVISORS 16

typedef struct DimSpec {
    Py_ssize_t pos;        /* the parameter's position */
    int pre;               /* the precondition on the value's type */
    int typed_part;        /* a key part id(type(v)) */
    int expr;              /* the key part computed from the value */
    uintptr_t type;        /* PRE_IS: the type, compared by address only */
    Py_ssize_t ngate;      /* PRE_SET: the types let through, by address */
    uintptr_t *gate;
    int layout, aligned;   /* EXPR_ARRAY's options */
    Py_ssize_t ndiv;       /* EXPR_INT_CLASS: the divisors, each >= 2 */
    long long div[MAX_DIVISORS];
    PyObject *divobj[MAX_DIVISORS];  /* the divisors as given (a class's k is one of them) */
    unsigned long long align;        /* EXPR_PTR */
    Py_ssize_t nbranch;    /* EXPR_UNION: the branches, each with its types in ``gate`` */
    struct DimSpec *branch;
} DimSpec;

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

typedef struct {
    PyObject_HEAD
    int mode;
    int nested;
    PyObject *index;       /* the snapshot's index dict (shared with the Python side) */
    PyObject *linear;      /* the LINEAR sentinel */
    PyObject *followers;   /* the FOLLOWERS sentinel */
    PyObject *tick;        /* maxsize: stamp each hit with tick(); else NULL */
    Py_ssize_t ndims;
    Py_ssize_t nparts;
    DimSpec *dims;
} State;

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

static PyTypeObject StateType;

static uintptr_t
as_address(PyObject *o)
{
    void *p = PyLong_AsVoidPtr(o);
    return (uintptr_t)p;
}

static int parse_extra(DimSpec *d, PyObject *extra);

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

/* ---- array facts and int classes ([Note: Array facts] in compiler/array_facts.py) -------
 *
 * The same values as the Python functions, computed here only where that reads nothing but
 * C struct fields: a numpy array's fields (PyArrayObject_fields: data, nd, descr, flags, a
 * stable public layout, checked once against numpy's own answers by set_array_support), an
 * exact int's value. A dtype's key comes from array_facts' own cache (id -> (dtype, key));
 * any other case is NOT_NATIVE: the call is forwarded and Python computes the fact. */

typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} ArrayFields;

#define ARR_C_CONTIGUOUS 0x1
#define ARR_F_CONTIGUOUS 0x2
#define ARR_ALIGNED 0x100
#define ARR_WRITEABLE 0x400

static PyTypeObject *ndarray_type = NULL;  /* set by set_array_support */
static PyObject *dtype_cache = NULL;       /* array_facts._dtype_keys */
static PyObject *str_C, *str_F, *str_A, *str_i32, *str_i64, *str_u64;

/* What a fact function returns when it must not compute the fact here. */
static PyObject NOT_NATIVE_OBJ;
#define NOT_NATIVE (&NOT_NATIVE_OBJ)

static int
parse_extra(DimSpec *d, PyObject *extra)
{
    Py_ssize_t n = PyTuple_GET_SIZE(extra);
    if (d->expr == EXPR_ARRAY) {
        if (n != 2) {
            goto bad;
        }
        d->layout = PyObject_IsTrue(PyTuple_GET_ITEM(extra, 0));
        d->aligned = PyObject_IsTrue(PyTuple_GET_ITEM(extra, 1));
        return (d->layout < 0 || d->aligned < 0) ? -1 : 0;
    }
    if (d->expr == EXPR_INT_CLASS) {
        if (n > MAX_DIVISORS) {
            goto bad;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *o = PyTuple_GET_ITEM(extra, j);
            if (!PyLong_CheckExact(o)) {
                goto bad;
            }
            long long v = PyLong_AsLongLong(o);
            if (v == -1 && PyErr_Occurred()) {
                return -1;
            }
            if (v < 2) {
                goto bad;
            }
            d->div[j] = v;
            d->divobj[j] = Py_NewRef(o);
            d->ndiv = j + 1;
        }
        return 0;
    }
    if (d->expr == EXPR_UNION) {
        d->branch = PyMem_Calloc(n ? n : 1, sizeof(DimSpec));
        if (d->branch == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        d->nbranch = n;
        for (Py_ssize_t j = 0; j < n; j++) {
            DimSpec *b = &d->branch[j];
            PyObject *tids, *bextra;
            PyObject *spec = PyTuple_GET_ITEM(extra, j);
            if (!PyTuple_Check(spec) ||
                !PyArg_ParseTuple(spec, "O!iO!:branch", &PyTuple_Type, &tids, &b->expr,
                                  &PyTuple_Type, &bextra)) {
                if (!PyErr_Occurred()) {
                    goto bad;
                }
                return -1;
            }
            if (b->expr < EXPR_NONE || b->expr >= EXPR_UNION) {
                goto bad;
            }
            b->ngate = PyTuple_GET_SIZE(tids);
            b->gate = PyMem_Calloc(b->ngate ? b->ngate : 1, sizeof(uintptr_t));
            if (b->gate == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t i = 0; i < b->ngate; i++) {
                b->gate[i] = as_address(PyTuple_GET_ITEM(tids, i));
                if (PyErr_Occurred()) {
                    return -1;
                }
            }
            if (parse_extra(b, bextra) < 0) {
                return -1;
            }
        }
        return 0;
    }
    if (d->expr == EXPR_PTR) {
        if (n != 1 || !PyLong_CheckExact(PyTuple_GET_ITEM(extra, 0))) {
            goto bad;
        }
        unsigned long long a = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(extra, 0));
        if (a == (unsigned long long)-1 && PyErr_Occurred()) {
            return -1;
        }
        if (a < 2) {
            goto bad;
        }
        d->align = a;
        return 0;
    }
    if (n == 0) {
        return 0;
    }
bad:
    PyErr_SetString(PyExc_ValueError, "State: bad options of a dim's fact");
    return -1;
}

/* array_fact(v, layout, aligned) of a numpy array (a subclass too: its struct, as numpy's
 * own descriptors read it); a new reference, NULL with an error, or NOT_NATIVE. */
static PyObject *
array_fact_native(PyObject *v, int layout, int aligned)
{
    if (ndarray_type == NULL || !PyObject_TypeCheck(v, ndarray_type)) {
        return NOT_NATIVE;
    }
    ArrayFields *a = (ArrayFields *)v;
    PyObject *d = a->descr;
    PyObject *ident = PyLong_FromVoidPtr((void *)d);
    if (ident == NULL) {
        return NULL;
    }
    PyObject *hit = PyDict_GetItemWithError(dtype_cache, ident);  /* an int key: no code runs */
    Py_DECREF(ident);
    if (hit == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        return NOT_NATIVE;  /* not cached (first sight, or metadata): Python computes it */
    }
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 2 || PyTuple_GET_ITEM(hit, 0) != d) {
        return NOT_NATIVE;
    }
    PyObject *key = Py_NewRef(PyTuple_GET_ITEM(hit, 1));  /* held before any allocation */
    int flags = a->flags;
    PyObject *code = Py_None;
    if (layout) {
        code = (flags & ARR_C_CONTIGUOUS) ? str_C : (flags & ARR_F_CONTIGUOUS) ? str_F : str_A;
    }
    PyObject *nd = PyLong_FromLong(a->nd);
    if (nd == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    PyObject *fact = PyTuple_Pack(5, key, nd, code, (flags & ARR_WRITEABLE) ? Py_True : Py_False,
                                  aligned ? ((flags & ARR_ALIGNED) ? Py_True : Py_False) : Py_None);
    Py_DECREF(key);
    Py_DECREF(nd);
    return fact;
}

/* int_class(v, divisors); NOT_NATIVE past 64 bits. */
static PyObject *
int_class_native(PyObject *v, const DimSpec *d)
{
    if (!PyLong_CheckExact(v)) {
        return Py_NewRef(Py_None);
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow) {
        return NOT_NATIVE;
    }
    PyObject *width = (x >= -0x80000000LL && x <= 0x7FFFFFFFLL) ? str_i32 : str_i64;
    PyObject *k;
    if (x == 1) {
        k = PyLong_FromLong(1);
    }
    else {
        k = NULL;
        for (Py_ssize_t j = 0; j < d->ndiv; j++) {
            if (x % d->div[j] == 0) {
                k = Py_NewRef(d->divobj[j]);
                break;
            }
        }
        if (k == NULL) {
            k = PyLong_FromLong(0);
        }
    }
    if (k == NULL) {
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, width, k);
    Py_DECREF(k);
    return out;
}

/* data_ptr_aligned(v, align) of an exact numpy array (a subclass may define data_ptr). */
static PyObject *
ptr_aligned_native(PyObject *v, unsigned long long align)
{
    if (ndarray_type == NULL || Py_TYPE(v) != ndarray_type) {
        return NOT_NATIVE;
    }
    uintptr_t p = (uintptr_t)((ArrayFields *)v)->data;
    return Py_NewRef((p % align) == 0 ? Py_True : Py_False);
}

static inline PyObject *type_id(PyObject *v);

/* One key part computed from the value: a new reference, NULL with an error, or NOT_NATIVE
 * (forward the call: Python computes it). */
static PyObject *
compute_part(const DimSpec *d, PyObject *v)
{
    switch (d->expr) {
    case EXPR_VALUE:
        return Py_NewRef(v);
    case EXPR_ID:
        return PyLong_FromVoidPtr((void *)v);
    case EXPR_LEN: {
        /* Only for builtin containers (the State is built so): runs no user code. */
        Py_ssize_t n = PyObject_Length(v);
        if (n < 0) {
            PyErr_Clear();
            return NOT_NATIVE;
        }
        return PyLong_FromSsize_t(n);
    }
    case EXPR_ARRAY:
        return array_fact_native(v, d->layout, d->aligned);
    case EXPR_INT_CLASS:
        return int_class_native(v, d);
    case EXPR_PTR:
        return ptr_aligned_native(v, d->align);
    case EXPR_UNION: {
        uintptr_t tp = (uintptr_t)Py_TYPE(v);
        for (Py_ssize_t j = 0; j < d->nbranch; j++) {
            const DimSpec *b = &d->branch[j];
            Py_ssize_t i = 0;
            while (i < b->ngate && b->gate[i] != tp) {
                i++;
            }
            if (i == b->ngate) {
                continue;
            }
            PyObject *u = type_id(v);
            if (u == NULL || b->expr == EXPR_NONE) {
                return u;  /* a fact that is the type: its id alone */
            }
            PyObject *rest = compute_part(b, v);
            if (rest == NULL || rest == NOT_NATIVE) {
                Py_DECREF(u);
                return rest;
            }
            PyObject *part = PyTuple_Pack(2, u, rest);
            Py_DECREF(u);
            Py_DECREF(rest);
            return part;
        }
        return NOT_NATIVE;  /* a type with no fact chosen: NOKEY, in Python */
    }
    default:
        return NOT_NATIVE;
    }
}

/* set_array_support(ndarray, dtype_cache, probe, data, nd, flags): use numpy arrays' struct
 * fields once they agree with numpy's own answers on ``probe``; returns whether they do. */
static PyObject *
set_array_support(PyObject *module, PyObject *args)
{
    PyObject *cls, *cache, *probe;
    unsigned long long data;
    int nd, flags;
    if (!PyArg_ParseTuple(args, "O!O!OKii:set_array_support", &PyType_Type, &cls, &PyDict_Type,
                          &cache, &probe, &data, &nd, &flags)) {
        return NULL;
    }
    if (!PyObject_TypeCheck(probe, (PyTypeObject *)cls) ||
        ((PyTypeObject *)cls)->tp_basicsize < (Py_ssize_t)sizeof(ArrayFields)) {
        Py_RETURN_FALSE;
    }
    ArrayFields *a = (ArrayFields *)probe;
    PyObject *dtype = PyObject_GetAttrString(probe, "dtype");
    if (dtype == NULL) {
        return NULL;
    }
    int same = (uintptr_t)a->data == (uintptr_t)data && a->nd == nd && a->flags == flags &&
               a->descr == dtype;
    Py_DECREF(dtype);
    if (!same) {
        Py_RETURN_FALSE;
    }
    Py_INCREF(cls);
    Py_XSETREF(ndarray_type, (PyTypeObject *)cls);
    Py_INCREF(cache);
    Py_XSETREF(dtype_cache, cache);
    Py_RETURN_TRUE;
}

/* The fact functions themselves, for the differential tests: the fact, or LookupError when
 * the C path would forward the call instead. */
static PyObject *
native_result(PyObject *r)
{
    if (r == NOT_NATIVE) {
        PyErr_SetString(PyExc_LookupError, "not computed natively: the call is forwarded");
        return NULL;
    }
    return r;
}

static PyObject *
py_array_fact(PyObject *module, PyObject *args)
{
    PyObject *v;
    int layout = 1, aligned = 0;
    if (!PyArg_ParseTuple(args, "O|pp:array_fact", &v, &layout, &aligned)) {
        return NULL;
    }
    return native_result(array_fact_native(v, layout, aligned));
}

static PyObject *
py_int_class(PyObject *module, PyObject *args)
{
    PyObject *v, *divisors = NULL;
    if (!PyArg_ParseTuple(args, "O|O!:int_class", &v, &PyTuple_Type, &divisors)) {
        return NULL;
    }
    DimSpec d;
    memset(&d, 0, sizeof(d));
    d.expr = EXPR_INT_CLASS;
    PyObject *dflt = NULL;
    if (divisors == NULL) {
        dflt = Py_BuildValue("(i)", 16);
        if (dflt == NULL) {
            return NULL;
        }
        divisors = dflt;
    }
    PyObject *r = NULL;
    if (parse_extra(&d, divisors) == 0) {
        r = native_result(int_class_native(v, &d));
    }
    for (Py_ssize_t j = 0; j < d.ndiv; j++) {
        Py_CLEAR(d.divobj[j]);
    }
    Py_XDECREF(dflt);
    return r;
}

static PyObject *
py_data_ptr_aligned(PyObject *module, PyObject *args)
{
    PyObject *v;
    unsigned long long align = 16;
    if (!PyArg_ParseTuple(args, "O|K:data_ptr_aligned", &v, &align)) {
        return NULL;
    }
    if (align < 2) {
        PyErr_SetString(PyExc_ValueError, "align must be >= 2");
        return NULL;
    }
    return native_result(ptr_aligned_native(v, align));
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
    .tp_name = "jitguard._src._speedups.State",
    .tp_basicsize = sizeof(State),
    .tp_dealloc = (destructor)State_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One snapshot's key layout, as codes, and its index.",
    .tp_traverse = (traverseproc)State_traverse,
    .tp_clear = (inquiry)State_clear,
    .tp_getset = State_getset,
    .tp_new = State_new,
};

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

/* The key part of a value's type: id(type(v)). */
static inline PyObject *
type_id(PyObject *v)
{
    return PyLong_FromVoidPtr((void *)Py_TYPE(v));
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
    if (st == NULL || st->mode == MODE_FORWARD || nargs != self->nargs || slot_type == NULL ||
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
    return 0;
}

static int
Dispatch_clear(Dispatch *self)
{
    Py_CLEAR(self->state);
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

/* Attributes: its own __dict__ (the fallback's), then the fallback's (``__code__``,
 * ``__defaults__``, ``__annotations__``, ...). */
static PyObject *
Dispatch_getattro(Dispatch *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr((PyObject *)self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError) || self->fallback == NULL) {
        return found;
    }
    PyErr_Clear();
    return PyObject_GetAttr(self->fallback, name);
}

static PyObject *
Dispatch_repr(Dispatch *self)
{
    if (self->fallback == NULL) {
        return PyUnicode_FromString("<jitguard dispatch (cleared)>");
    }
    return PyObject_Repr(self->fallback);
}

/* install(state): the layout and index the next calls use (one store). */
static PyObject *
Dispatch_install(Dispatch *self, PyObject *state)
{
    if (state != Py_None && !Py_IS_TYPE(state, &StateType)) {
        PyErr_SetString(PyExc_TypeError, "install takes a State or None");
        return NULL;
    }
    PyObject *new = state == Py_None ? NULL : Py_NewRef(state);
    Py_XSETREF(self->state, (State *)new);
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
    .tp_name = "jitguard._src._speedups.Dispatch",
    .tp_basicsize = sizeof(Dispatch),
    .tp_dealloc = (destructor)Dispatch_dealloc,
    .tp_vectorcall_offset = offsetof(Dispatch, vectorcall),
    .tp_call = (ternaryfunc)Dispatch_call,
    .tp_repr = (reprfunc)Dispatch_repr,
    .tp_getattro = (getattrofunc)Dispatch_getattro,
    .tp_setattro = PyObject_GenericSetAttr,
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

/* ---- the module ---------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"set_slot_type", set_slot_type, METH_O,
     "Learn where the cache's Slot class keeps hits, last, artifact and residual."},
    {"set_array_support", set_array_support, METH_VARARGS,
     "Read numpy arrays' struct fields, once they agree with numpy's answers on a probe."},
    {"array_fact", py_array_fact, METH_VARARGS,
     "array_fact(x, layout=True, aligned=False) as the C path computes it (LookupError: forwarded)."},
    {"int_class", py_int_class, METH_VARARGS,
     "int_class(x, divisors=(16,)) as the C path computes it (LookupError: forwarded)."},
    {"data_ptr_aligned", py_data_ptr_aligned, METH_VARARGS,
     "data_ptr_aligned(x, align=16) as the C path computes it (LookupError: forwarded)."},
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
