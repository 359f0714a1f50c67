/* jitguard._src._speedups: array tokens, the interned array facts of ARRAY_MATCH keys, and
 * dtype keys, found by a dtype's address ([Note: Array facts] in compiler/array_facts.py).
 * Not compiled on its own: facts.c.h includes it (one translation unit), after
 * ArrayFields, ndarray_type, dtype_cache, token_type and NOT_NATIVE. */

/* array_token(v, layout, aligned) ([Note: Array facts]): the interned fact of a numpy
 * array, found by its dtype's address and a code of its ndim and the flags the fact reads,
 * the code array_facts computes:
 *     flags & MASK[sel] | sel << 4 | nd << 16,   sel = layout | aligned << 1.
 * First in a small direct-mapped table of this module's own (each row holds its dtype, so
 * the address is that dtype's for as long as the row lives, and the token), then in
 * array_facts' cache (``_dtype_keys[id(d)][2][code]``), which has rows for immutable dtypes
 * only (no metadata, no fields) and only for facts Python has interned: anything else is
 * NOT_NATIVE, and Python computes and interns it. A new reference, NULL with an error. */
static const int token_masks[4] = {
    ARR_WRITEABLE, ARR_WRITEABLE | 3, ARR_WRITEABLE | ARR_ALIGNED, ARR_WRITEABLE | ARR_ALIGNED | 3,
};

#define TOKEN_ROWS 256  /* a power of two */
typedef struct {
    PyObject *descr;  /* held */
    long code;
    PyObject *token;  /* held */
    PyObject *pair;   /* (id(ndarray), token), a union dim's part for an exact ndarray; or NULL */
} TokenRow;
static TokenRow token_rows[TOKEN_ROWS];

static inline TokenRow *
token_row(PyObject *descr, long code)
{
    unsigned long long h = ((unsigned long long)(uintptr_t)descr >> 4) ^
                           ((unsigned long long)code * 0x9E3779B97F4A7C15ULL);
    h ^= h >> 29;
    return &token_rows[h & (TOKEN_ROWS - 1)];
}

/* Fill a row; what it held is let go last (a dtype's or token's dealloc may run code). */
static void
set_token_row(TokenRow *row, PyObject *descr, long code, PyObject *token)
{
    PyObject *old_d = row->descr, *old_t = row->token, *old_p = row->pair;
    row->descr = descr == NULL ? NULL : Py_NewRef(descr);
    row->token = token == NULL ? NULL : Py_NewRef(token);
    row->pair = NULL;
    row->code = code;
    Py_XDECREF(old_d);
    Py_XDECREF(old_t);
    Py_XDECREF(old_p);
}

static void
clear_token_rows(void)
{
    for (Py_ssize_t i = 0; i < TOKEN_ROWS; i++) {
        set_token_row(&token_rows[i], NULL, -1, NULL);
    }
}

/* The token of a numpy array as a new reference, with its row's address and code in
 * ``*where`` and ``*code``; NULL with an error, or NOT_NATIVE. */
static PyObject *
array_token_at(PyObject *v, int layout, int aligned, PyObject **where, long *code_out)
{
    if (ndarray_type == NULL || token_type == NULL || !PyObject_TypeCheck(v, ndarray_type)) {
        return NOT_NATIVE;
    }
    ArrayFields *a = (ArrayFields *)v;
    PyObject *d = a->descr;
    int sel = (layout ? 1 : 0) | (aligned ? 2 : 0);
    if (a->nd < 0 || a->nd > 0x7fff) {
        return NOT_NATIVE;
    }
    long code = (long)(a->flags & token_masks[sel]) | (long)sel << 4 | (long)a->nd << 16;
    *where = d;
    *code_out = code;
    TokenRow *row = token_row(d, code);
    if (row->descr == d && row->code == code) {
        return Py_NewRef(row->token);
    }
    PyObject *hit = dtype_cache_row(d);
    if (hit == NULL) {
        return PyErr_Occurred() ? NULL : NOT_NATIVE;
    }
    if (!PyDict_CheckExact(PyTuple_GET_ITEM(hit, 2))) {
        return NOT_NATIVE;
    }
    PyObject *tokens = Py_NewRef(PyTuple_GET_ITEM(hit, 2));
    PyObject *key = PyLong_FromLong(code);
    if (key == NULL) {
        Py_DECREF(tokens);
        return NULL;
    }
    PyObject *token = PyDict_GetItemWithError(tokens, key);  /* an int key: no code runs */
    Py_DECREF(key);
    Py_XINCREF(token);
    Py_DECREF(tokens);
    if (token == NULL) {
        return PyErr_Occurred() ? NULL : NOT_NATIVE;
    }
    if (Py_TYPE(token) != token_type) {
        Py_DECREF(token);
        return NOT_NATIVE;
    }
    set_token_row(token_row(d, code), d, code, token);
    return token;
}

static PyObject *
array_token_native(PyObject *v, int layout, int aligned)
{
    PyObject *d;
    long code;
    return array_token_at(v, layout, aligned, &d, &code);
}

/* A union dim's part of an exact ndarray, ``(id(ndarray), array_token(v, ...))``: one
 * tuple per row, built once (a key is hashed, not allocated, on each call). */
static PyObject *
array_pair_native(PyObject *v, int layout, int aligned)
{
    PyObject *d;
    long code;
    PyObject *token = array_token_at(v, layout, aligned, &d, &code);
    if (token == NULL || token == NOT_NATIVE) {
        return token;
    }
    TokenRow *row = token_row(d, code);
    if (row->descr == d && row->code == code && row->token == token && row->pair != NULL) {
        Py_DECREF(token);
        return Py_NewRef(row->pair);
    }
    PyObject *u = type_id(v);
    PyObject *pair = u == NULL ? NULL : PyTuple_Pack(2, u, token);
    Py_XDECREF(u);
    /* The allocations may have run code (a gc pass) that refilled the row: check again. */
    if (pair != NULL && row->descr == d && row->code == code && row->token == token &&
        row->pair == NULL) {
        row->pair = Py_NewRef(pair);
    }
    Py_DECREF(token);
    return pair;
}

/* dtype_key(v) of a dtype array_facts has cached (``_dtype_keys[id(v)]``, whose row holds
 * ``v`` itself: an immutable dtype, no metadata or fields); anything else is NOT_NATIVE. */
static PyObject *
dtype_key_native(PyObject *v)
{
    PyObject *hit = dtype_cache_row(v);
    if (hit == NULL) {
        return PyErr_Occurred() ? NULL : NOT_NATIVE;
    }
    return Py_NewRef(PyTuple_GET_ITEM(hit, 1));
}
