/* The structure snapshot's check: [Note: Skipping structure guards by version tags] in
 * compiler/snapshot.py. Python 3.10 and 3.11 only (dict version tags and the dict pointer
 * of managed dicts as read here); elsewhere the module has no TagSnapshot and the Python
 * side runs every guard. */

#if PY_VERSION_HEX < 0x030C0000
#define JG_HAVE_TAGS 1

#ifndef JG_TAGS_AHEAD
#define JG_TAGS_AHEAD 8
#endif

enum { NODE_TYPE = 0, NODE_INSTANCE_DICT = 1, NODE_DICT = 2 };

typedef struct {
    PyObject *obj;          /* borrowed: alive while the snapshot holds (see the Note) */
    PyTypeObject *type;     /* borrowed: held by ``keep`` */
    unsigned int type_tag;
    int mode;
    PyObject *dict;         /* the expected instance dict (NODE_INSTANCE_DICT), borrowed */
    uint64_t tag;           /* the dict's expected version tag (modes 1 and 2) */
    PyObject *slots;        /* NULL, or the tuple ``slot_values`` gave (held by ``keep``) */
} TagNode;

/* What an empty slot (NULL) reads as in ``slot_values``: no Python object is it. */
static PyObject *tags_empty_slot;

/* Objects whose slots are C fields read by their type's own read-only member descriptors:
 * an exact functools.partial's func, args and keywords, an exact property's fget, fset and
 * fdel. Each type is learned once (``tags_learn_members``), with the offsets its member
 * descriptors give; a type that is not immutable, or lacks one of those object members,
 * is left out, and then its objects have no slots. */
#define JG_MEMBER_TYPES 2
typedef struct {
    PyTypeObject *type;     /* NULL where not learned; else held for the process's life */
    const char *const *names;
    Py_ssize_t offsets[3];
} TagMemberType;
static TagMemberType tags_member_types[JG_MEMBER_TYPES];

static void
tags_learn_type(TagMemberType *out, PyObject *tp, const char *const names[3])
{
    if (!PyType_Check(tp) || !(((PyTypeObject *)tp)->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)) {
        return;
    }
    Py_ssize_t offsets[3];
    for (int i = 0; i < 3; i++) {
        /* borrowed; the type's dict is never changed (an immutable type) */
        PyObject *d = PyDict_GetItemString(((PyTypeObject *)tp)->tp_dict, names[i]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            return;
        }
        PyMemberDef *def = ((PyMemberDescrObject *)d)->d_member;
        if (def->type != T_OBJECT || !(def->flags & READONLY)) {
            return;
        }
        offsets[i] = def->offset;
    }
    Py_INCREF(tp);
    out->type = (PyTypeObject *)tp;
    out->names = names;
    memcpy(out->offsets, offsets, sizeof(offsets));
}

/* MEMBER_SLOTS: {type: (name, name, name)} for each type learned, the attributes whose
 * reads its slots are (the recorder reads its member slots from here: one list of them). */
static PyObject *
tags_member_slots(void)
{
    PyObject *out = PyDict_New();
    for (int k = 0; out != NULL && k < JG_MEMBER_TYPES; k++) {
        TagMemberType *mt = &tags_member_types[k];
        if (mt->type == NULL) {
            continue;
        }
        PyObject *names = Py_BuildValue("(sss)", mt->names[0], mt->names[1], mt->names[2]);
        if (names == NULL || PyDict_SetItem(out, (PyObject *)mt->type, names) < 0) {
            Py_XDECREF(names);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(names);
    }
    return out;
}

static int
tags_learn_members(void)
{
    static const char *const partial_names[3] = {"func", "args", "keywords"};
    static const char *const property_names[3] = {"fget", "fset", "fdel"};
    PyObject *mod = PyImport_ImportModule("functools");
    if (mod == NULL) {
        PyErr_Clear();
    }
    else {
        PyObject *tp = PyObject_GetAttrString(mod, "partial");
        Py_DECREF(mod);
        if (tp == NULL) {
            PyErr_Clear();
        }
        else {
            tags_learn_type(&tags_member_types[0], tp, partial_names);
            Py_DECREF(tp);
        }
    }
    tags_learn_type(&tags_member_types[1], (PyObject *)&PyProperty_Type, property_names);
    return 0;
}

/* The slots whose values a node may pin, by the node's exact type (see the Note's
 * "function slots"): a function's code, defaults, keyword defaults, closure, name and
 * qualname; a cell's contents; a functools.partial's func, args and keywords; a
 * property's fget, fset and fdel; a class's
 * MRO, namespace dict, name and qualname (an exact list's items are its slots too:
 * ``tags_slots_match`` and ``slot_values``). Fills ``out`` (at most JG_MAX_SLOTS) and
 * returns how many; -1 for any other type. */
#define JG_MAX_SLOTS 6
static int
tags_slots(PyObject *o, PyObject **out)
{
    if (Py_IS_TYPE(o, &PyFunction_Type)) {
        PyFunctionObject *f = (PyFunctionObject *)o;
        out[0] = f->func_code;
        out[1] = f->func_defaults;
        out[2] = f->func_kwdefaults;
        out[3] = f->func_closure;
        out[4] = f->func_name;
        out[5] = f->func_qualname;
        return 6;
    }
    if (Py_IS_TYPE(o, &PyCell_Type)) {
        out[0] = ((PyCellObject *)o)->ob_ref;
        return 1;
    }
    if (PyType_Check(o)) {
        PyTypeObject *t = (PyTypeObject *)o;
        int heap = (t->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0;
        out[0] = t->tp_mro;
        out[1] = t->tp_dict;
        /* a static type's name is its tp_name, which never changes */
        out[2] = heap ? ((PyHeapTypeObject *)o)->ht_name : NULL;
        out[3] = heap ? ((PyHeapTypeObject *)o)->ht_qualname : NULL;
        return 4;
    }
    /* last: the rarest kinds of slot nodes (the others above are most of a model's) */
    for (int k = 0; k < JG_MEMBER_TYPES; k++) {
        TagMemberType *mt = &tags_member_types[k];
        if (mt->type != NULL && Py_IS_TYPE(o, mt->type)) {
            for (int i = 0; i < 3; i++) {
                out[i] = *(PyObject **)((char *)o + mt->offsets[i]);
            }
            return 3;
        }
    }
    return -1;
}

static int
tags_slots_match(PyObject *o, PyObject *expected)
{
    if (PyList_CheckExact(o)) {
        /* an exact list's slots are its items, compared by address (held by ``keep``) */
        Py_ssize_t len = PyList_GET_SIZE(o);
        if (len != PyTuple_GET_SIZE(expected)) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < len; i++) {
            if (PyList_GET_ITEM(o, i) != PyTuple_GET_ITEM(expected, i)) {
                return 0;
            }
        }
        return 1;
    }
    PyObject *now[JG_MAX_SLOTS];
    int n = tags_slots(o, now);
    if (n < 0 || n != PyTuple_GET_SIZE(expected)) {
        return 0;
    }
    for (int i = 0; i < n; i++) {
        PyObject *v = now[i] != NULL ? now[i] : tags_empty_slot;
        if (v != PyTuple_GET_ITEM(expected, i)) {
            return 0;
        }
    }
    return 1;
}

typedef struct {
    Py_ssize_t pos;         /* the argument position */
    Py_ssize_t sub;         /* -1, or the item of that argument (an exact tuple) */
    PyObject *ref;          /* a weak reference to the object recorded there (owned) */
    PyObject *obj;          /* what it referred to (borrowed, compared by address only) */
} TagRoot;

/* A node that is an exact dict or OrderedDict with no pinned slots: only its version tag is
 * compared. The snapshot holds the dict strongly, so its address is never that of another
 * object, and it is compared first, in any order (see ``tag_snapshot_call``). */
typedef struct {
    PyDictObject *dict;     /* owned */
    uint64_t tag;
} TagDict;

typedef struct {
    PyObject_HEAD
    TagRoot *roots;
    Py_ssize_t n_roots;
    TagDict *dicts;         /* the plain dict nodes, taken out of ``nodes`` */
    Py_ssize_t n_dicts;
    TagNode *nodes;         /* the other nodes, in the recorded order */
    Py_ssize_t n_nodes;
    PyObject *keep;         /* strong references: the types, pinned roots */
} TagSnapshot;

/* Whether a node can be a TagDict: an exact dict or OrderedDict (static, immutable types:
 * ``__class__`` cannot be assigned on their instances and their namespaces cannot change,
 * so the object's type and the type's tag need no comparing) with no pinned slots. */
static int
tags_plain_dict(PyTypeObject *tp, int mode, PyObject *slots)
{
    return mode == NODE_DICT && slots == Py_None
        && (tp == &PyDict_Type || tp == &PyODict_Type)
        && (tp->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)
        && !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

static int
tags_type_ok(PyTypeObject *tp, unsigned int tag)
{
    return (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && tp->tp_version_tag == tag;
}

static PyObject *
tag_snapshot_call(TagSnapshot *self, PyObject *args, PyObject *kwargs)
{
    PyObject *frame;
    if (!PyArg_ParseTuple(args, "O!:TagSnapshot", &PyTuple_Type, &frame)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(frame);
    for (Py_ssize_t i = 0; i < self->n_roots; i++) {
        TagRoot *r = &self->roots[i];
        if (r->pos >= n) {
            Py_RETURN_FALSE;
        }
        PyObject *live = PyWeakref_GET_OBJECT(r->ref);
        PyObject *arg = PyTuple_GET_ITEM(frame, r->pos);
        if (r->sub >= 0) {
            if (!PyTuple_CheckExact(arg) || PyTuple_GET_SIZE(arg) <= r->sub) {
                Py_RETURN_FALSE;
            }
            arg = PyTuple_GET_ITEM(arg, r->sub);
        }
        if (live == Py_None || live != r->obj || arg != live) {
            Py_RETURN_FALSE;
        }
    }
    /* The plain dicts first: each is held, so reading its tag is safe whatever its container
     * did; every other node keeps the recorded order, and a container of one of them that
     * is a plain dict has been compared by then. */
    Py_ssize_t nd_count = self->n_dicts;
    const TagDict *dicts = self->dicts;
    for (Py_ssize_t i = 0; i < nd_count; i++) {
        if (i + JG_TAGS_AHEAD < nd_count) {
            __builtin_prefetch(dicts[i + JG_TAGS_AHEAD].dict);
        }
        if (dicts[i].dict->ma_version_tag != dicts[i].tag) {
            Py_RETURN_FALSE;
        }
    }
    Py_ssize_t nn = self->n_nodes;
    for (Py_ssize_t i = 0; i < nn; i++) {
        TagNode *nd = &self->nodes[i];
        PyObject *o = nd->obj;
        if (i + JG_TAGS_AHEAD < nn) {
            /* Memory-level parallelism: the nodes are independent, their objects scattered.
             * A prefetch never faults, so an address whose object died is harmless here
             * (it is dereferenced only once its container was found unchanged). */
            TagNode *ahead = &self->nodes[i + JG_TAGS_AHEAD];
            __builtin_prefetch(ahead->obj);
            if (ahead->mode == NODE_INSTANCE_DICT) {
                __builtin_prefetch(ahead->dict);
            }
        }
        if (Py_TYPE(o) != nd->type || !tags_type_ok(nd->type, nd->type_tag)) {
            Py_RETURN_FALSE;
        }
        if (nd->slots != NULL && !tags_slots_match(o, nd->slots)) {
            Py_RETURN_FALSE;
        }
        if (nd->mode == NODE_DICT) {
            if (((PyDictObject *)o)->ma_version_tag != nd->tag) {
                Py_RETURN_FALSE;
            }
        }
        else if (nd->mode == NODE_INSTANCE_DICT) {
            PyObject **dp = _PyObject_GetDictPtr(o);
            if (dp == NULL) {
                PyErr_Clear();
                Py_RETURN_FALSE;
            }
            if (*dp != nd->dict || ((PyDictObject *)*dp)->ma_version_tag != nd->tag) {
                Py_RETURN_FALSE;
            }
        }
    }
    Py_RETURN_TRUE;
}

static void
tag_snapshot_dealloc(TagSnapshot *self)
{
    for (Py_ssize_t i = 0; i < self->n_roots; i++) {
        Py_XDECREF(self->roots[i].ref);
    }
    for (Py_ssize_t i = 0; i < self->n_dicts; i++) {
        Py_XDECREF(self->dicts[i].dict);
    }
    PyMem_Free(self->dicts);
    PyMem_Free(self->roots);
    PyMem_Free(self->nodes);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* TagSnapshot(roots, nodes, keep): roots a tuple of (pos, sub, weakref, id); nodes a tuple of
 * (id, type, type_tag, mode, dict_id, tag, slots), slots None or what ``slot_values`` gave
 * for that object; keep a tuple holding the types, the slot tuples (and so the objects in
 * them: an address compared is never one that was freed and reused) and pinned objects
 * strongly. The Python side builds them (compiler/snapshot.py). */
static PyObject *
tag_snapshot_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *roots, *nodes, *keep;
    if (!PyArg_ParseTuple(args, "O!O!O!:TagSnapshot", &PyTuple_Type, &roots, &PyTuple_Type,
                          &nodes, &PyTuple_Type, &keep)) {
        return NULL;
    }
    TagSnapshot *self = (TagSnapshot *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->n_roots = PyTuple_GET_SIZE(roots);
    Py_ssize_t total = PyTuple_GET_SIZE(nodes);
    self->roots = PyMem_Calloc(self->n_roots ? self->n_roots : 1, sizeof(TagRoot));
    self->nodes = PyMem_Calloc(total ? total : 1, sizeof(TagNode));
    self->dicts = PyMem_Calloc(total ? total : 1, sizeof(TagDict));
    Py_INCREF(keep);
    self->keep = keep;
    if (self->roots == NULL || self->nodes == NULL || self->dicts == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < self->n_roots; i++) {
        PyObject *ref, *id;
        Py_ssize_t pos, sub;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(roots, i), "nnO!O!", &pos, &sub,
                              &_PyWeakref_RefType, &ref, &PyLong_Type, &id)) {
            Py_DECREF(self);
            return NULL;
        }
        if (pos < 0) {
            PyErr_SetString(PyExc_ValueError, "TagSnapshot: a root's position is negative");
            Py_DECREF(self);
            return NULL;
        }
        self->roots[i].pos = pos;
        self->roots[i].sub = sub;
        Py_INCREF(ref);
        self->roots[i].ref = ref;
        self->roots[i].obj = (PyObject *)PyLong_AsVoidPtr(id);
    }
    for (Py_ssize_t i = 0; i < total; i++) {
        PyObject *id, *tp, *dict_id, *slots;
        unsigned long long type_tag, tag;
        int mode;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(nodes, i), "O!O!KiO!KO", &PyLong_Type, &id,
                              &PyType_Type, &tp, &type_tag, &mode, &PyLong_Type, &dict_id,
                              &tag, &slots)) {
            Py_DECREF(self);
            return NULL;
        }
        if (slots != Py_None && !PyTuple_Check(slots)) {
            PyErr_SetString(PyExc_TypeError, "TagSnapshot: a node's slots are None or a tuple");
            Py_DECREF(self);
            return NULL;
        }
        if (tags_plain_dict((PyTypeObject *)tp, mode, slots)) {
            /* the caller holds every recorded object while it builds the snapshot (the
             * recorder's nodes), so this address is that of a live dict */
            PyObject *d = (PyObject *)PyLong_AsVoidPtr(id);
            if (d == NULL || Py_TYPE(d) != (PyTypeObject *)tp) {
                PyErr_SetString(PyExc_ValueError,
                                "TagSnapshot: a dict node's address is not that of its type");
                Py_DECREF(self);
                return NULL;
            }
            TagDict *td = &self->dicts[self->n_dicts++];
            Py_INCREF(d);
            td->dict = (PyDictObject *)d;
            td->tag = (uint64_t)tag;
            continue;
        }
        TagNode *nd = &self->nodes[self->n_nodes++];
        nd->obj = (PyObject *)PyLong_AsVoidPtr(id);
        nd->type = (PyTypeObject *)tp;
        nd->type_tag = (unsigned int)type_tag;
        nd->mode = mode;
        nd->dict = (PyObject *)PyLong_AsVoidPtr(dict_id);
        nd->tag = (uint64_t)tag;
        nd->slots = slots == Py_None ? NULL : slots;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyTypeObject TagSnapshotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitguard._src._speedups.TagSnapshot",
    .tp_basicsize = sizeof(TagSnapshot),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A structure snapshot: calling it on the check's arguments tuple says whether "
              "every recorded root, type, type version tag, instance dict and dict version "
              "tag is unchanged.",
    .tp_new = tag_snapshot_new,
    .tp_call = (ternaryfunc)tag_snapshot_call,
    .tp_dealloc = (destructor)tag_snapshot_dealloc,
};

/* dict_version(d): d's version tag. */
static PyObject *
py_dict_version(PyObject *mod, PyObject *d)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "dict_version(d) takes a dict");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(((PyDictObject *)d)->ma_version_tag);
}

/* type_version(tp): tp's version tag, assigned now if it has none (a lookup does that);
 * 0 when it cannot have one. */
static PyObject *
py_type_version(PyObject *mod, PyObject *tp)
{
    if (!PyType_Check(tp)) {
        PyErr_SetString(PyExc_TypeError, "type_version(tp) takes a type");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)tp;
    if (!(t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        (void)_PyType_Lookup(t, str_dict);
    }
    if (!(t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        return PyLong_FromLong(0);
    }
    return PyLong_FromUnsignedLong(t->tp_version_tag);
}

/* instance_dict_id(o): the address of o's instance dict as the snapshot reads it
 * (materialized if it was not), or 0 when o has none. */
static PyObject *
py_instance_dict_id(PyObject *mod, PyObject *o)
{
    PyObject **dp = _PyObject_GetDictPtr(o);
    if (dp == NULL || *dp == NULL || !PyDict_Check(*dp)) {
        PyErr_Clear();
        return PyLong_FromLong(0);
    }
    return PyLong_FromVoidPtr(*dp);
}

/* slot_values(o): the values of o's pinnable slots (an empty one as ``EMPTY_SLOT``), or
 * None when o's exact type has none. */
static PyObject *
py_slot_values(PyObject *mod, PyObject *o)
{
    if (PyList_CheckExact(o)) {
        return PyList_AsTuple(o);
    }
    PyObject *now[JG_MAX_SLOTS];
    int n = tags_slots(o, now);
    if (n < 0) {
        Py_RETURN_NONE;
    }
    PyObject *t = PyTuple_New(n);
    if (t == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *v = now[i] != NULL ? now[i] : tags_empty_slot;
        Py_INCREF(v);
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

#define JG_TAGS_METHODS \
    {"slot_values", py_slot_values, METH_O, \
     "slot_values(o): the values of o's pinnable slots (an exact list's items), None if its type has none."}, \
    {"dict_version", py_dict_version, METH_O, "dict_version(d): d's version tag."}, \
    {"type_version", py_type_version, METH_O, \
     "type_version(tp): tp's version tag (assigned now if missing), 0 if it has none."}, \
    {"instance_dict_id", py_instance_dict_id, METH_O, \
     "instance_dict_id(o): the address of o's instance dict, 0 if none."},
#else
#define JG_TAGS_METHODS
#endif
