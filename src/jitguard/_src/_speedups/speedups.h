/* jitguard._src._speedups: what the parts of the one translation unit share (see
 * speedups.c): the build options, the codes of a State (dispatch/fast.py speaks them too),
 * a dim's spec, the State object, and two tiny helpers. */
#ifndef JITGUARD_SPEEDUPS_H
#define JITGUARD_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#ifdef Py_GIL_DISABLED
#error "jitguard._src._speedups.ext relies on the GIL; the free-threaded build uses pure Python"
#endif

#define MAX_PARTS 64
/* What native.py expects (ABI there): a stale build of another version is not used. */
#define SPEEDUPS_ABI 15

/* ---- the codes of a State ---------------------------------------------------------- */

enum { MODE_FORWARD = 0, MODE_NODIMS = 1, MODE_EXACT = 2, MODE_KEYED = 3 };
enum { PRE_NONE = 0, PRE_IS = 1, PRE_SET = 2 };
enum {
    EXPR_NONE = 0, EXPR_VALUE = 1, EXPR_ID = 2, EXPR_LEN = 3,
    EXPR_ARRAY = 4,      /* array_token(v, layout, aligned), natively for numpy arrays */
    EXPR_INT_CLASS = 5,  /* int_class(v, divisors) */
    EXPR_PTR = 6,        /* data_ptr_aligned(v, align), natively for exact numpy arrays */
    EXPR_UNION = 7,      /* a union dim: per type, (id(type), its fact) or the id alone */
    EXPR_DTYPE = 8,      /* dtype_key(v) of a dtype in array_facts' cache */
};
#define EXPR_LAST EXPR_DTYPE
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

/* A type id given by Python (id(t)) as an address, compared by address only. */
static inline uintptr_t
as_address(PyObject *o)
{
    void *p = PyLong_AsVoidPtr(o);
    return (uintptr_t)p;
}

/* The key part of a value's type: id(type(v)). */
static inline PyObject *
type_id(PyObject *v)
{
    return PyLong_FromVoidPtr((void *)Py_TYPE(v));
}

#endif  /* JITGUARD_SPEEDUPS_H */
