/* jitguard._src._speedups: the key parts computed from a value (array facts, int classes,
 * aligned data pointers) and the Python entry points that compute them as the C path does.
 * Not compiled on its own: speedups.c includes it (one translation unit). */

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
static PyTypeObject *token_type = NULL;    /* array_facts.InternedFact */
static PyObject *str_C, *str_F, *str_A, *str_i32, *str_i64, *str_u64;

/* What a fact function returns when it must not compute the fact here. */
static PyObject NOT_NATIVE_OBJ;
#define NOT_NATIVE (&NOT_NATIVE_OBJ)

/* The row array_facts cached for the dtype at ``d`` (``_dtype_keys[id(d)]``: a 3-tuple
 * holding ``d`` itself, its key and its tokens), borrowed; NULL when there is none (first
 * sight, metadata or fields: Python computes it) or, with an error set, when the lookup
 * failed. The lookup is by an int key: no code of the dtype runs. */
static PyObject *
dtype_cache_row(PyObject *d)
{
    if (dtype_cache == NULL) {
        return NULL;
    }
    PyObject *ident = PyLong_FromVoidPtr((void *)d);
    if (ident == NULL) {
        return NULL;
    }
    PyObject *hit = PyDict_GetItemWithError(dtype_cache, ident);
    Py_DECREF(ident);
    if (hit == NULL || !PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 3 ||
        PyTuple_GET_ITEM(hit, 0) != d) {
        return NULL;
    }
    return hit;
}

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
            if (b->expr < EXPR_NONE || b->expr > EXPR_LAST || b->expr == EXPR_UNION) {
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
    PyObject *hit = dtype_cache_row(d);
    if (hit == NULL) {
        return PyErr_Occurred() ? NULL : NOT_NATIVE;
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

#include "tokens.c.h"

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
        return array_token_native(v, d->layout, d->aligned);
    case EXPR_INT_CLASS:
        return int_class_native(v, d);
    case EXPR_PTR:
        return ptr_aligned_native(v, d->align);
    case EXPR_DTYPE:
        return dtype_key_native(v);
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
            if (b->expr == EXPR_ARRAY && Py_TYPE(v) == ndarray_type) {
                return array_pair_native(v, b->layout, b->aligned);
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

/* set_array_support(ndarray, dtype_cache, token_type, probe, data, nd, flags): use numpy
 * arrays' struct fields once they agree with numpy's own answers on ``probe``; returns
 * whether they do. */
static PyObject *
set_array_support(PyObject *module, PyObject *args)
{
    PyObject *cls, *cache, *tokens, *probe;
    unsigned long long data;
    int nd, flags;
    if (!PyArg_ParseTuple(args, "O!O!O!OKii:set_array_support", &PyType_Type, &cls, &PyDict_Type,
                          &cache, &PyType_Type, &tokens, &probe, &data, &nd, &flags)) {
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
    Py_INCREF(tokens);
    Py_XSETREF(token_type, (PyTypeObject *)tokens);
    clear_token_rows();
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
py_array_token(PyObject *module, PyObject *args)
{
    PyObject *v;
    int layout = 1, aligned = 0;
    if (!PyArg_ParseTuple(args, "O|pp:array_token", &v, &layout, &aligned)) {
        return NULL;
    }
    return native_result(array_token_native(v, layout, aligned));
}

static PyObject *
py_dtype_key(PyObject *module, PyObject *v)
{
    return native_result(dtype_key_native(v));
}

static PyObject *
py_clear_tokens(PyObject *module, PyObject *unused)
{
    clear_token_rows();
    Py_RETURN_NONE;
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
