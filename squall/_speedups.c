/* squall._speedups: the per-tuple hot path of a bolt, in C (issue 14, item 2).
 *
 * Each name below is the compiled twin of a pure-Python one in squall/_native.py, which is used
 * instead when this module is not built or SQUALL_PURE_PYTHON is set; both pass the same tests:
 *
 *   TupleBase       the slots of squall.Tuple (values, _src, _root, _val, _oav)
 *   RouterBase      the slots of squall.engine.routing.Router
 *   TaskStatsBase, SpoutExecutorBase
 *                   a task's counters, and a spout executor's (C numbers, added to in place)
 *   BasicCollectorBase.emit
 *                   a BasicBolt's one-anchor emit (bolt_executor.BasicCollector)
 *   BasicExecute    a BasicBolt's execute-then-ack wrapper (bolt_executor._basic_execute)
 *   MemoChooser     the fields grouping's choice for a str key (_grouping.FieldsGrouping)
 *   NextChooser     the shuffle grouping's chooser: next(), whatever the values (_grouping.ShuffleGrouping)
 *   Sender          a task's sender to another worker (worker.transport.ZmqTransport.sender)
 *   batch_items     a received batch's Tuples, made from its columns (engine.serialize.Serializer)
 *   group_items     a batch's columns, made from the items to send (engine.serialize.Serializer)
 *   pack_batch      a batch of plain values as bytes, without msgpack (engine.serialize.Serializer)
 *   StaleWatch      when the TCP wire was last polled, and a wait without the GIL (worker.tcp.TcpTransport)
 *   ExecutingEntry  a bolt executor's line of its worker's board of inputs being executed (engine.executing)
 *   deliver_items   a received batch's items into their inboxes (engine.worker.Worker.receive_batch)
 *   BoltCollectorBase.ack
 *                   a bolt's ack of a one-tree input on its loop (bolt_executor.BoltCollector)
 *   SpoutCollectorBase.emit
 *                   a spout's emit, untracked or tracked with acking on (spout_executor.SpoutCollector)
 *   opaque_commit   a grouped combiner's commit into an opaque MemoryMapState (trident.state.memory)
 *   CountingEmit    the emit of a Trident function counted by a fused grouped Count (trident.processors)
 *   pack_rows       a Trident bolt's rows into the packs of the tasks their grouping chooses (trident.executor)
 *   combine_rows    a pack's rows combined per group into a grouped combiner's persist (trident.processors)
 *   TridentTupleBase, view_of
 *                   the slots of a TridentTuple with t[i] and len(t), and a view made without __init__ (trident.tuple)
 *
 * The Trident names live in squall/_speedups_trident.c, which this file includes (one module, two
 * files, so that the engine's C and Trident's can be edited apart); setup.py and squall._native
 * hash both.
 *
 * Why C: py-spy put 52% of W1's loop time (acking on, one worker) in those two functions' own
 * lines; each line is an attribute load or an int operation that CPython's bytecode pays 15-30 ns
 * for and C pays 1-2 ns. The semantics are the Python twins'; every case they do not handle
 * quickly (a direct stream, a wrong size, several roots, no router) is handed back to the
 * Python collector, so errors are raised by the same code on both paths.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <sys/epoll.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <time.h>

static PyObject *ZERO;   /* the int 0: an untracked tuple's root and value */
static PyObject *ONE;

/* A dict's look-up, store, removal and test of a key whose hash is already known: the acker's
 * and the spout's pending maps take one message's root through several buckets, and a 64-bit
 * int's hash is computed anew at every call (CPython 3.11 and 3.12 export these; later versions
 * hash each time). */
#if PY_VERSION_HEX < 0x030D0000
#define DICT_GET_H(d, k, h) _PyDict_GetItem_KnownHash((d), (k), (h))
#define DICT_SET_H(d, k, v, h) _PyDict_SetItem_KnownHash((d), (k), (v), (h))
#define DICT_DEL_H(d, k, h) _PyDict_DelItem_KnownHash((d), (k), (h))
#define DICT_CONTAINS_H(d, k, h) _PyDict_Contains_KnownHash((d), (k), (h))
#else
#define DICT_GET_H(d, k, h) ((void)(h), PyDict_GetItemWithError((d), (k)))
#define DICT_SET_H(d, k, v, h) ((void)(h), PyDict_SetItem((d), (k), (v)))
#define DICT_DEL_H(d, k, h) ((void)(h), PyDict_DelItem((d), (k)))
#define DICT_CONTAINS_H(d, k, h) ((void)(h), PyDict_Contains((d), (k)))
#endif

/* ---------------------------------------------------------------------------------------------
 * TupleBase
 */
typedef struct {
    PyObject_HEAD
    PyObject *values;
    PyObject *src;
    PyObject *root;
    /* the edge value of a tuple of one tree (0 untracked or of several trees): 64 bits in C, so that
     * an anchored emit makes no int for it and its ack frees none (`_val` in Python reads and
     * writes it as an int) */
    unsigned long long val;
    /* the xor of the edge ids of the tuples anchored to this one (Storm's outAckVal): 64 bits in C,
     * so that each emit xors without making an int and freeing the one before (`_oav` in Python
     * reads and writes it as an int) */
    unsigned long long oav;
} TupleBase;

static PyTypeObject TupleBase_Type;

/* PyObject_TypeCheck(o, base), remembering in *seen the last subtype of base that passed (with a
 * reference, so that its address is never another type's): squall's records are Python
 * subclasses of these bases (squall.Tuple of TupleBase, Router of RouterBase, TaskStats of
 * TaskStatsBase), which PyObject_TypeCheck tells by walking the subclass's MRO at every call:
 * 2.7% of a W1 worker's time (perf), a few checks for every tuple. */
static PyTypeObject *seen_tuple, *seen_router, *seen_task_stats, *seen_key_stats, *seen_spout_executor,
                    *seen_basic_collector;

static inline int
is_a(PyObject *o, PyTypeObject *base, PyTypeObject **seen)
{
    PyTypeObject *t = Py_TYPE(o);
    if (t == *seen || t == base)
        return 1;
    if (!PyType_IsSubtype(t, base))
        return 0;
    PyTypeObject *old = *seen;
    *seen = (PyTypeObject *)Py_NewRef(t);
    Py_XDECREF(old);
    return 1;
}

/* f(arg), or f() when arg is NULL. A bound builtin method of METH_O (an inbox's deque.append) or
 * METH_NOARGS (its popleft) is called through its C function at once: the vectorcall's dispatch,
 * recursion check and result check cost about 40 instructions a call, and W1 makes some thirty
 * such calls a sentence (a pop and an append for each of its tuples, the acker's messages). What
 * the function returns and raises is the same; anything else goes through the vectorcall. */
static inline PyObject *
call_quick(PyObject *f, PyObject *arg)
{
    if (PyCFunction_CheckExact(f)) {
        PyMethodDef *ml = ((PyCFunctionObject *)f)->m_ml;
        int kind = ml->ml_flags & (METH_VARARGS | METH_FASTCALL | METH_NOARGS | METH_O | METH_KEYWORDS | METH_METHOD);
        if (kind == (arg == NULL ? METH_NOARGS : METH_O))
            return ml->ml_meth(PyCFunction_GET_SELF(f), arg);
    }
    return arg == NULL ? PyObject_CallNoArgs(f) : PyObject_CallOneArg(f, arg);
}

/* A __slots__ member of a Python class (squall.engine.stats.TaskStatistics: left, freq, gaps,
 * by_handle), read and written at its offset. PyObject_GetAttr finds the member descriptor in
 * the type's method cache and calls its getter, about 150 instructions a read; the offset,
 * remembered with the type and its version tag (which changes when a class attribute is set),
 * reads it in a few. Anything else (a property, an instance dict, a slot not set) goes through
 * PyObject_GetAttr and PyObject_SetAttr, so its errors are theirs. */
typedef struct {
    PyTypeObject *type;  /* held, so that its address is no other type's */
    unsigned int version;
    Py_ssize_t offset;   /* 0: name is not a plain object slot of type */
} SlotCache;

static Py_ssize_t
slot_offset_slow(PyTypeObject *type, PyObject *name, SlotCache *c)
{
    Py_ssize_t offset = 0;
    PyObject *d = _PyType_Lookup(type, name);  /* borrowed; gives type a version tag */
    if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) && PyType_IsSubtype(type, PyDescr_TYPE(d))) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset > 0)
            offset = m->offset;
    }
    if (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) {
        Py_XSETREF(c->type, (PyTypeObject *)Py_NewRef((PyObject *)type));
        c->version = type->tp_version_tag;
        c->offset = offset;
    }
    return offset;
}

static inline Py_ssize_t
slot_offset(PyObject *o, PyObject *name, SlotCache *c)
{
    PyTypeObject *type = Py_TYPE(o);
    if (type == c->type && type->tp_version_tag == c->version && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return c->offset;
    return slot_offset_slow(type, name, c);
}

/* o.<name>, a new reference */
static inline PyObject *
slot_get(PyObject *o, PyObject *name, SlotCache *c)
{
    Py_ssize_t offset = slot_offset(o, name, c);
    if (offset > 0) {
        PyObject *v = *(PyObject **)((char *)o + offset);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name);
}

/* o.<name> = v; 0, or -1 with an error */
static inline int
slot_set(PyObject *o, PyObject *name, PyObject *v, SlotCache *c)
{
    Py_ssize_t offset = slot_offset(o, name, c);
    if (offset > 0) {
        PyObject **p = (PyObject **)((char *)o + offset);
        Py_XSETREF(*p, Py_NewRef(v));
        return 0;
    }
    return PyObject_SetAttr(o, name, v);
}

static SlotCache slot_left, slot_freq, slot_gaps, slot_by_handle;

static long long next_gap(PyObject *gaps);

/* whether root, a tuple's root, is tracked: an exact int's truth without the number protocol */
static inline int
is_tracked(PyObject *root)
{
    if (PyLong_CheckExact(root))
        return Py_SIZE(root) != 0;
    return PyObject_IsTrue(root);
}

/* whether n values fit a router's nfields (an int): a small int's one digit read at once */
static inline int
fits_nfields(Py_ssize_t n, PyObject *nfields)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(nfields) && Py_SIZE(nfields) == 1)
        return n == (Py_ssize_t)((PyLongObject *)nfields)->ob_digit[0];
    if (PyLong_CheckExact(nfields) && Py_SIZE(nfields) == 0)
        return n == 0;
#endif
    Py_ssize_t want = PyLong_AsSsize_t(nfields);
    if (want == -1 && PyErr_Occurred())
        return -1;
    return n == want;
}

static int oav_bits(PyObject *oav, unsigned long long *bits);
static int val_bits(PyObject *val, unsigned long long *bits);
static int TupleBase_clear(TupleBase *self);

/* A Python subclass of TupleBase that adds nothing (squall.Tuple: __slots__ = (), no __del__,
 * no weak references) is made and freed here without the generic paths: PyType_GenericAlloc
 * zeroes the object and dispatches on its layout, and subtype_dealloc, the dealloc of every
 * Python class, looks for a __del__, weak references, __slots__ and a __dict__ to clear before
 * calling TupleBase's (about 130 instructions a tuple together; W1 makes 11 a sentence). The
 * subclass is adopted at its first tuple (every one is made by tuple_make), its tp_dealloc then
 * being subclass_dealloc. */
static PyTypeObject *lean_tuple_type;

/* Freed lean Tuples, kept for the next ones to be made, as CPython keeps its own tuples and
 * lists: a word's Tuple dies within a drain of being made, and taking one back here skips
 * pymalloc's allocation and free and the collector's link and unlink (about 120 instructions a
 * Tuple; W1 makes and frees 11 a sentence). Bounded, so what it holds is never more than
 * TUPLE_FREE_MAX Tuples' 80 bytes (80 kB): the inputs of the largest drain of a task (1,024)
 * are freed before the next drain makes as many. Each one kept still holds its reference to
 * lean_tuple_type, and is untracked with its slots cleared. */
#define TUPLE_FREE_MAX 1024
static TupleBase *tuple_free[TUPLE_FREE_MAX];
static int tuple_nfree;

/* Lists of values kept from lean Tuples' deaths for the decoder's next Tuples (r_values): a
 * worker decodes the words another worker sent in bursts of hundreds (a poll's batches), more
 * than CPython's own free list of 80 lists holds, so each one was a list and an item array made
 * by pymalloc and freed again a drain later (W1 on 2 workers: PyList_New, list_dealloc and their
 * allocations were the largest part of the crossing's extra time in perf). Only as many lists are
 * kept as the decoder has lately had to make afresh (lists_wanted), so a worker that decodes
 * nothing keeps none and leaves its bolts' lists to CPython's free list. A kept list is empty,
 * untracked and holds its item array (of at most LIST_KEEP_ITEMS). */
#define LIST_FREE_MAX 1024
#define LIST_KEEP_ITEMS 4
static PyObject *list_free[LIST_FREE_MAX];
static int list_nfree;
static Py_ssize_t lists_wanted;

/* self's values kept for the decoder (when it wants lists: lists_wanted > 0) if nothing else
 * holds them (refcount 1): then self's values are NULL */
static void
keep_values(TupleBase *self)
{
    PyObject *v = self->values;
    if (list_nfree >= LIST_FREE_MAX || v == NULL || !PyList_CheckExact(v) || Py_REFCNT(v) != 1)
        return;
    PyListObject *l = (PyListObject *)v;
    if (l->allocated < 1 || l->allocated > LIST_KEEP_ITEMS)
        return;
    self->values = NULL;
    PyObject_GC_UnTrack(v);
    Py_ssize_t n = Py_SIZE(l);
    Py_SET_SIZE(l, 0);  /* empty before its items go: freeing one may run code, which cannot reach it */
    while (n > 0)
        Py_XDECREF(l->ob_item[--n]);
    list_free[list_nfree++] = v;
    lists_wanted--;
}

/* *out: a kept list of size 0 with room for n items (1 <= n <= LIST_KEEP_ITEMS), tracked, or
 * NULL when none is kept (then one more is wanted); -1 on an error */
static int
kept_list(Py_ssize_t n, PyObject **out)
{
    *out = NULL;
    if (list_nfree == 0) {
        if (lists_wanted < LIST_FREE_MAX)
            lists_wanted++;
        return 0;
    }
    PyListObject *l = (PyListObject *)list_free[--list_nfree];
    if (l->allocated < n) {
        PyObject **items = PyMem_Realloc(l->ob_item, sizeof(PyObject *) * (size_t)n);
        if (items == NULL) {
            Py_DECREF(l);
            PyErr_NoMemory();
            return -1;
        }
        l->ob_item = items;
        l->allocated = n;
    }
    PyObject_GC_Track(l);
    *out = (PyObject *)l;
    return 0;
}

static void
subclass_dealloc(TupleBase *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (lists_wanted > 0)  /* a worker that decodes nothing pays this test alone */
        keep_values(self);
    TupleBase_clear(self);
    /* lean_tuple_type's own instances only: a Python subclass of it (a class with __slots__ or
     * a __del__) inherits this dealloc through subtype_dealloc, and one of its instances taken
     * back would be handed out as a lean Tuple of the wrong type, holding a reference to it */
    if (type == lean_tuple_type && tuple_nfree < TUPLE_FREE_MAX) {
        tuple_free[tuple_nfree++] = self;
        return;
    }
    type->tp_free((PyObject *)self);
    Py_DECREF(type);  /* an instance of a heap type holds its type */
}

static int
adds_nothing(PyTypeObject *type)
{
    return type->tp_base == &TupleBase_Type && (type->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
           type->tp_basicsize == sizeof(TupleBase) && type->tp_itemsize == 0 && type->tp_dictoffset == 0 &&
           type->tp_weaklistoffset == 0 && !(type->tp_flags & Py_TPFLAGS_MANAGED_DICT) &&
           type->tp_finalize == NULL && type->tp_del == NULL && type->tp_alloc == PyType_GenericAlloc &&
           type->tp_free == PyObject_GC_Del;
}

static PyObject *tuple_make_bits(PyTypeObject *type, PyObject *values, PyObject *src, PyObject *root,
                                 unsigned long long val, unsigned long long oav);

static PyObject *
tuple_make(PyTypeObject *type, PyObject *values, PyObject *src, PyObject *root, PyObject *val,
           PyObject *oav)
{
    unsigned long long bits = 0, vbits = 0;
    if ((oav != ZERO && oav_bits(oav, &bits) < 0) || (val != ZERO && val_bits(val, &vbits) < 0))
        return NULL;
    return tuple_make_bits(type, values, src, root, vbits, bits);
}

/* a Tuple of type (squall.Tuple, or a subclass) with its edge value and outAckVal as 64 bits */
static PyObject *
tuple_make_bits(PyTypeObject *type, PyObject *values, PyObject *src, PyObject *root,
                unsigned long long val, unsigned long long bits)
{
    TupleBase *self;
    if (type == lean_tuple_type || (lean_tuple_type == NULL && adds_nothing(type))) {
        if (lean_tuple_type == NULL) {
            lean_tuple_type = (PyTypeObject *)Py_NewRef((PyObject *)type);
            type->tp_dealloc = (destructor)subclass_dealloc;
        }
        if (tuple_nfree > 0) {  /* untracked, cleared, and holding its type already */
            self = tuple_free[--tuple_nfree];
            _Py_NewReference((PyObject *)self);
        } else {
            self = PyObject_GC_New(TupleBase, type);  /* every field is set below: nothing to zero */
            if (self == NULL)
                return NULL;
        }
        self->values = Py_NewRef(values);
        self->src = Py_NewRef(src);
        self->root = Py_NewRef(root);
        self->val = val;
        self->oav = bits;
        PyObject_GC_Track(self);
        return (PyObject *)self;
    }
    self = (TupleBase *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(values); self->values = values;
    Py_INCREF(src); self->src = src;
    Py_INCREF(root); self->root = root;
    self->val = val;
    self->oav = bits;
    return (PyObject *)self;
}

static PyObject *
TupleBase_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "src", "root", "val", "oav", NULL};
    PyObject *values, *src, *root = ZERO, *val = ZERO, *oav = ZERO;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if ((kwds == NULL || PyDict_GET_SIZE(kwds) == 0) && nargs >= 2 && nargs <= 5) {  /* the engine's calls */
        return tuple_make(type, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1),
                          nargs > 2 ? PyTuple_GET_ITEM(args, 2) : ZERO, nargs > 3 ? PyTuple_GET_ITEM(args, 3) : ZERO,
                          nargs > 4 ? PyTuple_GET_ITEM(args, 4) : ZERO);
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOO:Tuple", kwlist, &values, &src, &root, &val, &oav))
        return NULL;
    return tuple_make(type, values, src, root, val, oav);
}

static int
TupleBase_traverse(TupleBase *self, visitproc visit, void *arg)
{
    Py_VISIT(self->values);
    Py_VISIT(self->src);
    Py_VISIT(self->root);
    return 0;
}

static int
TupleBase_clear(TupleBase *self)
{
    Py_CLEAR(self->values);
    Py_CLEAR(self->src);
    Py_CLEAR(self->root);
    return 0;
}

static void
TupleBase_dealloc(TupleBase *self)
{
    PyObject_GC_UnTrack(self);
    TupleBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
TupleBase_reduce(TupleBase *self, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("O(OOOKK)", (PyObject *)Py_TYPE(self), self->values, self->src, self->root,
                         self->val, self->oav);
}

static PyObject *
TupleBase_get_oav(TupleBase *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->oav);
}

static int
TupleBase_set_oav(TupleBase *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "a Tuple's _oav cannot be deleted");
        return -1;
    }
    return oav_bits(value, &self->oav);
}

static PyObject *
TupleBase_get_val(TupleBase *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->val);
}

static int
TupleBase_set_val(TupleBase *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "a Tuple's _val cannot be deleted");
        return -1;
    }
    return val_bits(value, &self->val);
}

static PyGetSetDef TupleBase_getset[] = {
    {"_oav", (getter)TupleBase_get_oav, (setter)TupleBase_set_oav, NULL, NULL},
    {"_val", (getter)TupleBase_get_val, (setter)TupleBase_set_val, NULL, NULL},
    {NULL}
};

static PyMemberDef TupleBase_members[] = {
    {"values", T_OBJECT_EX, offsetof(TupleBase, values), 0, "The values."},
    {"_src", T_OBJECT_EX, offsetof(TupleBase, src), 0, NULL},
    {"_root", T_OBJECT_EX, offsetof(TupleBase, root), 0, NULL},
    {NULL}
};

static PyMethodDef TupleBase_methods[] = {
    {"__reduce__", (PyCFunction)TupleBase_reduce, METH_NOARGS, NULL},
    {NULL}
};

static PyTypeObject TupleBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.TupleBase",
    .tp_doc = "The slots of squall.Tuple (see squall._tuple).",
    .tp_basicsize = sizeof(TupleBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = TupleBase_new,
    .tp_traverse = (traverseproc)TupleBase_traverse,
    .tp_clear = (inquiry)TupleBase_clear,
    .tp_dealloc = (destructor)TupleBase_dealloc,
    .tp_members = TupleBase_members,
    .tp_getset = TupleBase_getset,
    .tp_methods = TupleBase_methods,
};

/* ---------------------------------------------------------------------------------------------
 * RouterBase: its fields are read by emit at C speed, and by Python as plain attributes.
 */
typedef struct {  /* every field a Python object, so the interpreter's quick slot access serves Python's reads too */
    PyObject_HEAD
    PyObject *stream;
    PyObject *src;
    PyObject *choose;
    PyObject *direct_targets;
    long long emitted;       /* C counters: Python reads and writes them as ints */
    long long transferred;
    PyObject *nfields;
    PyObject *direct;
    PyObject *silent;
} RouterBase;

static int
RouterBase_traverse(RouterBase *self, visitproc visit, void *arg)
{
    Py_VISIT(self->stream);
    Py_VISIT(self->src);
    Py_VISIT(self->choose);
    Py_VISIT(self->direct_targets);
    Py_VISIT(self->nfields);
    Py_VISIT(self->direct);
    Py_VISIT(self->silent);
    return 0;
}

static int
RouterBase_clear(RouterBase *self)
{
    Py_CLEAR(self->stream);
    Py_CLEAR(self->src);
    Py_CLEAR(self->choose);
    Py_CLEAR(self->direct_targets);
    Py_CLEAR(self->nfields);
    Py_CLEAR(self->direct);
    Py_CLEAR(self->silent);
    return 0;
}

static void
RouterBase_dealloc(RouterBase *self)
{
    PyObject_GC_UnTrack(self);
    RouterBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef RouterBase_members[] = {
    {"stream", T_OBJECT_EX, offsetof(RouterBase, stream), 0, NULL},
    {"src", T_OBJECT_EX, offsetof(RouterBase, src), 0, NULL},
    {"choose", T_OBJECT_EX, offsetof(RouterBase, choose), 0, NULL},
    {"direct_targets", T_OBJECT_EX, offsetof(RouterBase, direct_targets), 0, NULL},
    {"emitted", T_LONGLONG, offsetof(RouterBase, emitted), 0, NULL},
    {"transferred", T_LONGLONG, offsetof(RouterBase, transferred), 0, NULL},
    {"nfields", T_OBJECT_EX, offsetof(RouterBase, nfields), 0, NULL},
    {"direct", T_OBJECT_EX, offsetof(RouterBase, direct), 0, NULL},
    {"silent", T_OBJECT_EX, offsetof(RouterBase, silent), 0, NULL},
    {NULL}
};

static PyTypeObject RouterBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.RouterBase",
    .tp_doc = "The slots of squall.engine.routing.Router.",
    .tp_basicsize = sizeof(RouterBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)RouterBase_traverse,
    .tp_clear = (inquiry)RouterBase_clear,
    .tp_dealloc = (destructor)RouterBase_dealloc,
    .tp_members = RouterBase_members,
};

/* ---------------------------------------------------------------------------------------------
 * TaskStatsBase and SpoutExecutorBase: counters kept as C numbers. Python reads and writes them
 * as plain attributes (ints, a float); the compiled paths add to them without a Python int or
 * an attribute look-up per tuple (count, below), which was 11% of W2's loop as attribute adds.
 */
typedef struct {
    PyObject_HEAD
    long long acked, failed, executed, latency_count;
    double latency_sum;
} TaskStatsBase;

static PyMemberDef TaskStatsBase_members[] = {
    {"acked", T_LONGLONG, offsetof(TaskStatsBase, acked), 0, NULL},
    {"failed", T_LONGLONG, offsetof(TaskStatsBase, failed), 0, NULL},
    {"executed", T_LONGLONG, offsetof(TaskStatsBase, executed), 0, NULL},
    {"latency_count", T_LONGLONG, offsetof(TaskStatsBase, latency_count), 0, NULL},
    {"latency_sum", T_DOUBLE, offsetof(TaskStatsBase, latency_sum), 0, NULL},
    {NULL}
};

static PyTypeObject TaskStatsBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.TaskStatsBase",
    .tp_doc = "The counters of squall.engine.executor.TaskStats.",
    .tp_basicsize = sizeof(TaskStatsBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_members = TaskStatsBase_members,
};

typedef struct {
    PyObject_HEAD
    long long in_flight, emits;
} SpoutExecutorBase;

static PyMemberDef SpoutExecutorBase_members[] = {
    {"in_flight", T_LONGLONG, offsetof(SpoutExecutorBase, in_flight), 0, NULL},
    {"emits", T_LONGLONG, offsetof(SpoutExecutorBase, emits), 0, NULL},
    {NULL}
};

static PyTypeObject SpoutExecutorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.SpoutExecutorBase",
    .tp_doc = "The counters of squall.engine.spout_executor.SpoutExecutor.",
    .tp_basicsize = sizeof(SpoutExecutorBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_members = SpoutExecutorBase_members,
};

/* KeyStatsBase: the sampled figures of one key of a task (squall.engine.stats.KeyStats), as C
 * numbers that drain_inbox adds to in place */
typedef struct {
    PyObject_HEAD
    long long acked, failed, executed, latency_n, execute_n;
    double latency_ms, execute_ms;
} KeyStatsBase;

static PyMemberDef KeyStatsBase_members[] = {
    {"acked", T_LONGLONG, offsetof(KeyStatsBase, acked), 0, NULL},
    {"failed", T_LONGLONG, offsetof(KeyStatsBase, failed), 0, NULL},
    {"executed", T_LONGLONG, offsetof(KeyStatsBase, executed), 0, NULL},
    {"latency_n", T_LONGLONG, offsetof(KeyStatsBase, latency_n), 0, NULL},
    {"execute_n", T_LONGLONG, offsetof(KeyStatsBase, execute_n), 0, NULL},
    {"latency_ms", T_DOUBLE, offsetof(KeyStatsBase, latency_ms), 0, NULL},
    {"execute_ms", T_DOUBLE, offsetof(KeyStatsBase, execute_ms), 0, NULL},
    {NULL}
};

static PyTypeObject KeyStatsBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.KeyStatsBase",
    .tp_doc = "The figures of squall.engine.stats.KeyStats.",
    .tp_basicsize = sizeof(KeyStatsBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_members = KeyStatsBase_members,
};

static PyObject *str_left, *str_by_handle, *str_key_of, *str_open_samples, *str_freq, *str_gaps,
                *str_max_open, *str_close_sample;

/* The ack (acked 1) or fail (0) of input tup closes its sample in samples (id -> (tup, start,
 * ks)) if it was sampled: squall.engine.stats.TaskStatistics.close_sample (of sampled), in C
 * when ks is a KeyStatsBase and start a float, else by that method. 0, or -1 with an error. */
static int
close_sample(PyObject *samples, PyObject *sampled, PyObject *tup, int acked, PyObject *now)
{
    PyObject *id = PyLong_FromVoidPtr(tup);
    if (id == NULL)
        return -1;
    PyObject *entry = PyDict_GetItemWithError(samples, id);
    if (entry == NULL) {
        Py_DECREF(id);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *when = call_quick(now, NULL);
    if (when == NULL) {
        Py_DECREF(id);
        return -1;
    }
    int rc = -1;
    if (!(PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 3 && PyFloat_CheckExact(when) &&
          PyFloat_CheckExact(PyTuple_GET_ITEM(entry, 1)) &&
          is_a(PyTuple_GET_ITEM(entry, 2), &KeyStatsBase_Type, &seen_key_stats))) {
        PyObject *r = PyObject_CallMethodObjArgs(sampled, str_close_sample, id, acked ? Py_True : Py_False,
                                                 when, NULL);
        Py_XDECREF(r);
        rc = r == NULL ? -1 : 0;
        goto done;
    }
    KeyStatsBase *k = (KeyStatsBase *)Py_NewRef(PyTuple_GET_ITEM(entry, 2));
    double start = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(entry, 1));
    PyObject *f = PyObject_GetAttr(sampled, str_freq);
    long long freq = f ? PyLong_AsLongLong(f) : -1;
    Py_XDECREF(f);
    if ((freq != -1 || !PyErr_Occurred()) && PyDict_DelItem(samples, id) == 0) {
        if (acked) {  /* a failure is counted by the collector's fail, every one (exact) */
            k->acked += freq;
            k->latency_ms += 1000.0 * (PyFloat_AS_DOUBLE(when) - start);
            k->latency_n += 1;
        }
        rc = 0;
    }
    Py_DECREF(k);
done:
    Py_DECREF(when);
    Py_DECREF(id);
    return rc;
}

static int add_to_attr(PyObject *obj, PyObject *name, PyObject *by);

static int count_slow(PyObject *obj, PyTypeObject *type, PyTypeObject **seen, size_t offset, PyObject *name,
                      long long by);

/* obj.<name> += by: in place when obj is a `type` (the counter at offset), else by attribute.
 * Inline for the type seen last (a counter a tuple, or several: about 15 instructions of call
 * each) */
static inline int
count(PyObject *obj, PyTypeObject *type, PyTypeObject **seen, size_t offset, PyObject *name, long long by)
{
    if (Py_TYPE(obj) == *seen || Py_TYPE(obj) == type) {
        *(long long *)((char *)obj + offset) += by;
        return 0;
    }
    return count_slow(obj, type, seen, offset, name, by);
}

static int
count_slow(PyObject *obj, PyTypeObject *type, PyTypeObject **seen, size_t offset, PyObject *name, long long by)
{
    if (is_a(obj, type, seen)) {
        *(long long *)((char *)obj + offset) += by;
        return 0;
    }
    PyObject *b = PyLong_FromLongLong(by);
    if (b == NULL)
        return -1;
    int rc = add_to_attr(obj, name, b);
    Py_DECREF(b);
    return rc;
}

/* PyLong_AsUnsignedLongLong(v), without its detour through a byte array for the ints of 31 to
 * 64 bits that tuple ids are: on CPython 3.11 (30-bit digits, the layout this reads), an exact
 * int of at most three digits that fits is read from its digits; everything else, and every
 * other version, goes to PyLong_AsUnsignedLongLong (so the errors are its own) */
static inline unsigned long long
as_u64(PyObject *v)
{
#if PY_VERSION_HEX < 0x030C0000 && PYLONG_BITS_IN_DIGIT == 30
    if (PyLong_CheckExact(v)) {
        const digit *d = ((PyLongObject *)v)->ob_digit;
        switch (Py_SIZE(v)) {
        case 0:
            return 0;
        case 1:
            return d[0];
        case 2:
            return (unsigned long long)d[0] | (unsigned long long)d[1] << 30;
        case 3:
            if (d[2] >> 4 == 0)
                return (unsigned long long)d[0] | (unsigned long long)d[1] << 30 | (unsigned long long)d[2] << 60;
        }
    }
#endif
    return PyLong_AsUnsignedLongLong(v);
}

/* 0 and *out = v for an int of 0 .. 2**64 - 1; else -1, with no exception set */
static int
u64_of(PyObject *v, unsigned long long *out)
{
    /* a negative int (an ack's spout task, -1) is told by its sign: PyLong_AsUnsignedLongLong
     * would raise an OverflowError for us to clear, about 560 instructions, once for every ack
     * a bolt sends an acker in another worker */
#if PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(v) && Py_SIZE(v) < 0)
#else
    if (PyLong_CheckExact(v) && _PyLong_Sign(v) < 0)
#endif
        return -1;
    *out = as_u64(v);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* *bits = oav, a Tuple's xor of 64-bit edge ids; -1 with an error naming it when oav is not an
 * int of 0 .. 2**64 - 1 */
static int
oav_bits(PyObject *oav, unsigned long long *bits)
{
    unsigned long long b;  /* *bits is left as it was on an error */
    if (PyLong_Check(oav) && u64_of(oav, &b) == 0) {
        *bits = b;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "a Tuple's _oav is the xor of 64-bit edge ids, an int from 0 to "
                 "2**64 - 1: got %R", oav);
    return -1;
}

/* *bits = val, a Tuple's edge value (an edge id, or the xor of several); -1 with an error naming
 * it when val is not an int of 0 .. 2**64 - 1 */
static int
val_bits(PyObject *val, unsigned long long *bits)
{
    unsigned long long b;
    if (PyLong_Check(val) && u64_of(val, &b) == 0) {
        *bits = b;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "a Tuple's _val is a 64-bit edge value, an int from 0 to 2**64 - 1: "
                 "got %R", val);
    return -1;
}

/* a ^ b ^ c (c NULL: 0) as a new int: on 64 bits, making one int instead of one a step, when
   all are ints of 0 .. 2**64 - 1 (tuple and ack ids always are); else with Python's ^ */
static PyObject *
xor_of(PyObject *a, PyObject *b, PyObject *c)
{
    unsigned long long x, y, z = 0;
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b) && (c == NULL || PyLong_CheckExact(c)) &&
            u64_of(a, &x) == 0 && u64_of(b, &y) == 0 && (c == NULL || u64_of(c, &z) == 0))
        return PyLong_FromUnsignedLongLong(x ^ y ^ z);
    PyObject *ab = PyNumber_Xor(a, b);
    if (ab == NULL || c == NULL)
        return ab;
    Py_SETREF(ab, PyNumber_Xor(ab, c));
    return ab;
}

/* ---------------------------------------------------------------------------------------------
 * IdSource(seed, bits=64, times=1, plus=0): calling it returns the next random id of `bits` bits,
 * splitmix64 (Steele, Lea and Flood, 2014) from `seed`; with times or plus set, (id or 1) * times
 * + plus (a root that names its acker: spout_executor). Tuple and root ids are drawn this way because
 * Random.getrandbits(64) builds its int from bytes, several times the work; draw_id also hands
 * the C paths the id's 64 bits without reading them back out of the int.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    unsigned long long state, times, plus;
    int shift;
} IdSource;

static PyTypeObject IdSource_Type;

/* splitmix64: a state advances by SPLITMIX_GAMMA, and each state mixes into the next id (an
 * IdSource's ids, and the edge ids an outbox draws, edge_of) */
#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ULL

static inline unsigned long long
splitmix64_mix(unsigned long long z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline unsigned long long
id_next(IdSource *self)
{
    unsigned long long z = splitmix64_mix(self->state += SPLITMIX_GAMMA) >> self->shift;
    if (self->times == 1 && self->plus == 0)
        return z;
    return (z ? z : 1) * self->times + self->plus;
}

static PyObject *
IdSource_call(IdSource *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 0 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "an IdSource takes no arguments");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(id_next(self));
}

static PyObject *
IdSource_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"seed", "bits", "times", "plus", NULL};
    PyObject *seed;
    int bits = 64;
    unsigned long long times = 1, plus = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|iKK", kwlist, &seed, &bits, &times, &plus))
        return NULL;
    if (!PyLong_Check(seed) || bits < 1 || bits > 64) {
        PyErr_SetString(PyExc_ValueError, "IdSource(seed, bits): seed an int, bits from 1 to 64");
        return NULL;
    }
    unsigned long long top = bits == 64 ? ~0ULL : (1ULL << bits) - 1;
    if (times < 1 || (times > 1 && top > (~0ULL - plus) / times) || (times == 1 && plus > ~0ULL - top)) {
        PyErr_SetString(PyExc_ValueError, "IdSource(seed, bits, times, plus): times at least 1, and the "
                        "largest id times `times` plus `plus` below 2**64");
        return NULL;
    }
    unsigned long long state = PyLong_AsUnsignedLongLongMask(seed);  /* the seed's low 64 bits */
    if (state == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    IdSource *self = (IdSource *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->state = state;
    self->shift = 64 - bits;
    self->times = times;
    self->plus = plus;
    self->vectorcall = (vectorcallfunc)IdSource_call;
    return (PyObject *)self;
}

static PyTypeObject IdSource_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.IdSource",
    .tp_basicsize = sizeof(IdSource),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "IdSource(seed, bits=64): calling it returns the next random id of bits bits (splitmix64).",
    .tp_vectorcall_offset = offsetof(IdSource, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = IdSource_new,
};

/* ---------------------------------------------------------------------------------------------
 * RouterCache: a collector's router of the default stream, remembered. A task's routers (stream
 * -> Router, routing.build_routers) are made once and never replaced: a Router holds the
 * stream's emitted and transferred counts for the task's life. Remembered with the dict it came
 * from (held, so that its address is no other dict's), the look-up of "default" by name, about
 * 110 instructions an emit (W1: 20 emits a sentence), is made once.
 */
static PyObject *DEFAULT_STREAM;   /* "default" */

typedef struct {
    PyObject *routers;   /* the dict the router was found in */
    PyObject *router;
} RouterCache;

/* routers[stream], borrowed; NULL when there is none (an error set if the look-up raised) */
static inline PyObject *
router_of(RouterCache *c, PyObject *routers, PyObject *stream)
{
    if (stream == DEFAULT_STREAM && routers == c->routers && c->router != NULL)
        return c->router;
    PyObject *r = PyDict_GetItemWithError(routers, stream);
    if (r != NULL && stream == DEFAULT_STREAM) {
        Py_XSETREF(c->router, Py_NewRef(r));
        Py_XSETREF(c->routers, Py_NewRef(routers));
    }
    return r;
}

#define ROUTER_CACHE_VISIT(c) do { Py_VISIT((c).routers); Py_VISIT((c).router); } while (0)
#define ROUTER_CACHE_CLEAR(c) do { Py_CLEAR((c).routers); Py_CLEAR((c).router); } while (0)

/* DeliverCache: the callables a collector last delivered to, remembered with their tasks and the
 * version of the deliver dict (task -> callable) they were read at. CPython 3.11's dicts carry a
 * version that changes with every change (ma_version_tag): a worker that moves a task to
 * another loop replaces its callable (engine/worker.py), and the next delivery reads them all
 * again. Saves the look-up by task, about 110 instructions a delivery; on later versions, where
 * the tag is gone, every delivery looks up. A few tasks, not one: a fields grouping over two
 * workers sends about every other word to the other count task, and a cache of one missed on
 * 48% of W1's deliveries on 2 workers (callgrind). */
#define DELIVER_WAYS 4

typedef struct {
    PyObject *deliver;  /* the dict the entries were read from */
    uint64_t version;   /* its version then */
    PyObject *task[DELIVER_WAYS], *fn[DELIVER_WAYS];
    int next;           /* the entry the next miss replaces */
} DeliverCache;

#define DELIVER_CACHE_VISIT(c) do { \
        Py_VISIT((c).deliver); \
        for (int w_ = 0; w_ < DELIVER_WAYS; w_++) { Py_VISIT((c).task[w_]); Py_VISIT((c).fn[w_]); } \
    } while (0)
#define DELIVER_CACHE_CLEAR(c) do { \
        Py_CLEAR((c).deliver); \
        for (int w_ = 0; w_ < DELIVER_WAYS; w_++) { Py_CLEAR((c).task[w_]); Py_CLEAR((c).fn[w_]); } \
    } while (0)

/* ---------------------------------------------------------------------------------------------
 * BasicCollectorBase: the slots of a BasicBolt's collector, and its emit.
 */
typedef struct {
    PyObject_HEAD
    PyObject *input;     /* the Tuple being executed */
    PyObject *out;       /* the task's BoltCollector: everything but the quick path */
    PyObject *routers;   /* stream -> Router */
    PyObject *deliver;   /* task -> callable(item) */
    PyObject *rand;      /* () -> 64-bit edge id */
    PyObject *tuple_type;
    PyObject *nowhere;   /* routing's shared empty list */
    RouterCache dflt;    /* the default stream's router */
    DeliverCache sent;   /* the callable of the task delivered to last */
    char acking;
} BasicCollectorBase;

static int
BasicCollectorBase_traverse(BasicCollectorBase *self, visitproc visit, void *arg)
{
    Py_VISIT(self->input);
    Py_VISIT(self->out);
    Py_VISIT(self->routers);
    Py_VISIT(self->deliver);
    Py_VISIT(self->rand);
    Py_VISIT(self->tuple_type);
    Py_VISIT(self->nowhere);
    ROUTER_CACHE_VISIT(self->dflt);
    DELIVER_CACHE_VISIT(self->sent);
    return 0;
}

static int
BasicCollectorBase_clear(BasicCollectorBase *self)
{
    Py_CLEAR(self->input);
    Py_CLEAR(self->out);
    Py_CLEAR(self->routers);
    Py_CLEAR(self->deliver);
    Py_CLEAR(self->rand);
    Py_CLEAR(self->tuple_type);
    Py_CLEAR(self->nowhere);
    ROUTER_CACHE_CLEAR(self->dflt);
    DELIVER_CACHE_CLEAR(self->sent);
    return 0;
}

static void
BasicCollectorBase_dealloc(BasicCollectorBase *self)
{
    PyObject_GC_UnTrack(self);
    BasicCollectorBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *str_emit;
static PyObject *str_send_multi;

/* the callable remembered in c for task while deliver is unchanged, borrowed; NULL when there is none */
static inline PyObject *
deliver_hit(DeliverCache *c, PyObject *deliver, PyObject *task)
{
#if PY_VERSION_HEX < 0x030C0000
    if (c != NULL && c->deliver == deliver && PyDict_CheckExact(deliver) &&
            c->version == ((PyDictObject *)deliver)->ma_version_tag)
        for (int i = 0; i < DELIVER_WAYS; i++)
            if (c->task[i] == task)
                return c->fn[i];
#else
    (void)c, (void)deliver, (void)task;
#endif
    return NULL;
}

/* deliver[task] looked up, and remembered in c (c NULL: not); a new reference, or NULL with an
 * error (a KeyError for a task deliver does not have) */
static PyObject *
deliver_miss(DeliverCache *c, PyObject *deliver, PyObject *task)
{
    PyObject *d;
#if PY_VERSION_HEX < 0x030C0000
    uint64_t version = PyDict_CheckExact(deliver) ? ((PyDictObject *)deliver)->ma_version_tag : 0;
#endif
    d = PyDict_GetItemWithError(deliver, task);
    if (d == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, task);
        return NULL;
    }
    Py_INCREF(d);  /* ours before the cache lets go of anything (which may run a finaliser) */
#if PY_VERSION_HEX < 0x030C0000
    if (c != NULL && PyDict_CheckExact(deliver)) {
        if (c->deliver != deliver || c->version != version) {  /* another dict, or changed: all stale */
            for (int i = 0; i < DELIVER_WAYS; i++) {
                Py_CLEAR(c->task[i]);
                Py_CLEAR(c->fn[i]);
            }
            Py_XSETREF(c->deliver, Py_NewRef(deliver));
            c->version = version;
            c->next = 0;
        }
        int i = c->next;
        c->next = (i + 1) % DELIVER_WAYS;
        Py_XSETREF(c->fn[i], Py_NewRef(d));
        Py_XSETREF(c->task[i], Py_NewRef(task));
    }
#else
    (void)c;
#endif
    return d;
}

/* deliver[task], remembered in c while deliver is unchanged (c NULL: looked up); a new reference,
 * or NULL with an error (a KeyError for a task deliver does not have). Inline: the remembered
 * callable is read at once (each word's delivery). */
static inline PyObject *
deliver_fn(DeliverCache *c, PyObject *deliver, PyObject *task)
{
    PyObject *d = deliver_hit(c, deliver, task);
    if (d != NULL)
        return Py_NewRef(d);  /* held while it runs: a delivery may change the cache */
    return deliver_miss(c, deliver, task);
}

/* deliver_to, the callable remembered in c while deliver is unchanged (c NULL: deliver_to) */
static inline int
deliver_cached(DeliverCache *c, PyObject *deliver, PyObject *task, PyObject *item)
{
    PyObject *d = deliver_fn(c, deliver, task);
    if (d == NULL)
        return -1;
    PyObject *r = call_quick(d, item);
    Py_DECREF(d);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* deliver_to for every task of the list targets, the same item */
static int
deliver_to_all(DeliverCache *c, PyObject *deliver, PyObject *targets, PyObject *item)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(targets); i++) {
        PyObject *task = PyList_GET_ITEM(targets, i);
        Py_INCREF(task);  /* the list may change while an item is delivered */
        int rc = deliver_cached(c, deliver, task, item);
        Py_DECREF(task);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* a new id from rand(), its 64 bits in *bits; NULL with an exception set when it is not a
 * 64-bit int (what: "edge" or "root", for the message); a spout's and a bolt's emits */
static PyObject *
draw_id(PyObject *rand, unsigned long long *bits, const char *what)
{
    if (Py_IS_TYPE(rand, &IdSource_Type)) {  /* the bits without reading them back out of an int */
        *bits = id_next((IdSource *)rand);
        return PyLong_FromUnsignedLongLong(*bits);
    }
    PyObject *id = PyObject_CallNoArgs(rand);
    if (id == NULL)
        return NULL;
    if (!PyLong_CheckExact(id)) {
        PyErr_Format(PyExc_TypeError, "a %s id must be an int, got %R", what, id);
        Py_DECREF(id);
        return NULL;
    }
    *bits = as_u64(id);
    if (*bits == (unsigned long long)-1 && PyErr_Occurred()) {
        Py_DECREF(id);
        return NULL;
    }
    return id;
}

/* draw_id's bits alone: squall's IdSource makes no int */
static int
draw_bits(PyObject *rand, unsigned long long *bits)
{
    if (Py_IS_TYPE(rand, &IdSource_Type)) {
        *bits = id_next((IdSource *)rand);
        return 0;
    }
    PyObject *id = draw_id(rand, bits, "edge");
    if (id == NULL)
        return -1;
    Py_DECREF(id);
    return 0;
}

/* a tracked emit's delivery over a new edge: a crossing item written straight into its outbox
 * (Sender, below) */
static int send_edge(DeliverCache *c, PyObject *deliver, PyObject *task, PyTypeObject *tt, PyObject *values,
                     PyObject *src, PyObject *root, PyObject *rand, unsigned long long *xor);

static inline Py_ALWAYS_INLINE PyObject *choose_targets(PyObject *choose, PyObject *values);

static PyObject *
emit_by_python(BasicCollectorBase *self, PyObject *values, PyObject *stream)
{
    PyObject *input = self->input ? self->input : Py_None;
    return PyObject_CallMethodObjArgs(self->out, str_emit, values, input, stream, NULL);
}

static PyObject *
BasicCollectorBase_emit(BasicCollectorBase *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *values = nargs >= 1 ? args[0] : NULL, *stream = nargs >= 2 ? args[1] : DEFAULT_STREAM;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "emit(values, stream='default') takes at most 2 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        if (nargs < 2 && PyUnicode_CompareWithASCIIString(name, "stream") == 0) {
            stream = args[nargs + k];
        } else if (nargs < 1 && PyUnicode_CompareWithASCIIString(name, "values") == 0) {
            values = args[nargs + k];
        } else {
            PyErr_Format(PyExc_TypeError, "emit() got an unexpected keyword argument %R", name);
            return NULL;
        }
    }
    if (values == NULL) {
        PyErr_SetString(PyExc_TypeError, "emit() missing required argument 'values'");
        return NULL;
    }
    if (self->routers == NULL || !PyDict_Check(self->routers))
        return emit_by_python(self, values, stream);
    PyObject *ro = router_of(&self->dflt, self->routers, stream);
    if (ro == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError))
                return NULL;
            PyErr_Clear();  /* an unhashable stream (Storm's emit(streamId, values) order): Python's error names it */
        }
        return emit_by_python(self, values, stream);
    }
    int is_list = PyList_CheckExact(values);  /* the common case: no Tuple, its size at hand */
    if (!is_a(ro, &RouterBase_Type, &seen_router) ||
            (!is_list && (is_a(values, &TupleBase_Type, &seen_tuple) || !(PyList_Check(values) || PyTuple_Check(values)))))
        return emit_by_python(self, values, stream);  /* not a list of values (a str, a dict): Python's error */
    RouterBase *r = (RouterBase *)ro;
    if (r->direct != Py_False || r->nfields == NULL || r->silent == NULL)  /* a direct stream, or a router not set up: Python's errors */
        return emit_by_python(self, values, stream);
    Py_ssize_t n = is_list ? PyList_GET_SIZE(values) : PyObject_Size(values);
    if (n < 0) {
        PyErr_Clear();
        return emit_by_python(self, values, stream);
    }
    int fits = fits_nfields(n, r->nfields);
    if (fits <= 0) {
        if (fits < 0)
            return NULL;
        return emit_by_python(self, values, stream);
    }
    r->emitted++;
    if (r->silent == Py_True) {  /* nobody subscribes (W1's counts): nothing to route, make or send */
        Py_INCREF(self->nowhere);
        return self->nowhere;
    }
    PyObject *targets = choose_targets(r->choose, values);
    if (targets == NULL)
        return NULL;
    if (!PyList_Check(targets)) {
        PyErr_Format(PyExc_TypeError, "a grouping chose %R, not a list of task ids", targets);
        Py_DECREF(targets);
        return NULL;
    }
    Py_ssize_t nt = PyList_GET_SIZE(targets);
    if (nt == 0)
        return targets;
    r->transferred += nt;
    TupleBase *a = (TupleBase *)self->input;
    if (a == NULL || !is_a((PyObject *)a, &TupleBase_Type, &seen_tuple)) {
        Py_DECREF(targets);
        PyErr_SetString(PyExc_RuntimeError, "BasicOutputCollector.emit called outside execute");
        return NULL;
    }
    PyTypeObject *tt = (PyTypeObject *)self->tuple_type;
    PyObject *root = a->root;
    if (!PyLong_CheckExact(root)) {  /* several roots: the general path */
        PyObject *anchors = PyTuple_Pack(1, (PyObject *)a);
        if (anchors == NULL)
            goto fail;
        PyObject *res = PyObject_CallMethodObjArgs(self->out, str_send_multi, ro, targets, values, anchors, NULL);
        Py_DECREF(anchors);
        if (res == NULL)
            goto fail;
        Py_DECREF(res);
        return targets;
    }
    int tracked = is_tracked(root);
    if (tracked < 0)
        goto fail;
    Py_INCREF(root);  /* a->root may be replaced while we deliver */
    if (tracked && self->acking) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(targets); i++) {
            PyObject *task = PyList_GET_ITEM(targets, i);
            Py_INCREF(task);
            int rc = send_edge(&self->sent, self->deliver, task, tt, values, r->src, root, self->rand, &a->oav);
            Py_DECREF(task);
            if (rc < 0)
                goto fail_root;
        }
    } else {
        PyObject *t = tuple_make_bits(tt, values, r->src, ZERO, 0, 0);
        if (t == NULL)
            goto fail_root;
        int rc = deliver_to_all(&self->sent, self->deliver, targets, t);
        Py_DECREF(t);
        if (rc < 0)
            goto fail_root;
    }
    Py_DECREF(root);
    return targets;
fail_root:
    Py_DECREF(root);
fail:
    Py_DECREF(targets);
    return NULL;
}

static PyMethodDef BasicCollectorBase_methods[] = {
    {"emit", (PyCFunction)(void (*)(void))BasicCollectorBase_emit, METH_FASTCALL | METH_KEYWORDS,
     "Emit ``values`` on ``stream``, anchored to the current input."},
    {NULL}
};

static PyMemberDef BasicCollectorBase_members[] = {
    {"input", T_OBJECT, offsetof(BasicCollectorBase, input), 0, "The Tuple being executed."},
    {"_out", T_OBJECT, offsetof(BasicCollectorBase, out), 0, NULL},
    {"_routers", T_OBJECT, offsetof(BasicCollectorBase, routers), 0, NULL},
    {"_deliver", T_OBJECT, offsetof(BasicCollectorBase, deliver), 0, NULL},
    {"_rand", T_OBJECT, offsetof(BasicCollectorBase, rand), 0, NULL},
    {"_tuple_type", T_OBJECT, offsetof(BasicCollectorBase, tuple_type), 0, NULL},
    {"_nowhere", T_OBJECT, offsetof(BasicCollectorBase, nowhere), 0, NULL},
    {"_acking", T_BOOL, offsetof(BasicCollectorBase, acking), 0, NULL},
    {NULL}
};

static PyTypeObject BasicCollectorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.BasicCollectorBase",
    .tp_doc = "The slots and emit of squall.engine.bolt_executor.BasicCollector.",
    .tp_basicsize = sizeof(BasicCollectorBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)BasicCollectorBase_traverse,
    .tp_clear = (inquiry)BasicCollectorBase_clear,
    .tp_dealloc = (destructor)BasicCollectorBase_dealloc,
    .tp_members = BasicCollectorBase_members,
    .tp_methods = BasicCollectorBase_methods,
};

/* ---------------------------------------------------------------------------------------------
 * BasicExecute(user_execute, basic, ack, on_failed, failed_type, acks, stats, samples,
 *              sampled, now, inbox, ackers, ack_tag): calling it with a Tuple runs
 * bolt_executor._basic_execute's body (see there for the rules: the one-root ack is inlined and
 * coalesced with a sibling waiting next in the inbox).
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *user_execute, *basic, *ack, *on_failed, *failed_type, *acks, *stats, *samples,
             *sampled, *now, *inbox, *ackers, *ack_tag;
    /* A run of siblings' acks held here, not in acks, while acks is empty: held_root's xor so far
     * (W1's count bolt: ten words of a sentence, one in a row after the other; a dict look-up,
     * a store and a new int a word before). spill() hands it to acks, which the executor does
     * after every drain of the task, so that what Python sends (flush_acks) includes it. */
    PyObject *held_root;
    unsigned long long held_x;
    /* user_execute's function and instance when it is a bound method (a bolt's execute, bound
     * once after prepare): called with the instance as the first argument, without the bound
     * method's own call in between (about 40 instructions an input) */
    PyObject *user_fn, *user_self;
    /* user_fn's own vectorcall, called at once: a Python function's (_PyFunction_Vectorcall)
     * returns a result or sets an error, so PyObject_Vectorcall's look-up of the slot and its
     * check of the result (about 30 instructions an input) are spared */
    vectorcallfunc user_call;
    /* The sampled input being executed (drain_inbox's sampled_execute sets it for the call), its
     * KeyStats, start and the sample rate's freq: a BasicBolt acks its input before its execute
     * returns, so its sample is opened and closed within the call, without the open samples'
     * dict (an entry keyed by id, a tuple of three, a look-up and a removal: about 1,500
     * instructions a sampled input, one in 20) */
    PyObject *sample_tup, *sample_ks;
    double sample_start;
    long long sample_freq;
} BasicExecute;

#define BE_FIELDS(X) X(user_execute) X(basic) X(ack) X(on_failed) X(failed_type) X(acks) \
    X(stats) X(samples) X(sampled) X(now) X(inbox) X(ackers) X(ack_tag)

static PyObject *str_acks, *str_acked, *str_executed, *MINUS_ONE;

static int
BasicExecute_traverse(BasicExecute *self, visitproc visit, void *arg)
{
#define V(f) Py_VISIT(self->f);
    BE_FIELDS(V)
#undef V
    Py_VISIT(self->held_root);
    Py_VISIT(self->user_fn);
    Py_VISIT(self->user_self);
    Py_VISIT(self->sample_tup);
    Py_VISIT(self->sample_ks);
    return 0;
}

static int
BasicExecute_clear(BasicExecute *self)
{
#define C(f) Py_CLEAR(self->f);
    BE_FIELDS(C)
#undef C
    Py_CLEAR(self->held_root);
    Py_CLEAR(self->user_fn);
    Py_CLEAR(self->user_self);
    Py_CLEAR(self->sample_tup);
    Py_CLEAR(self->sample_ks);
    return 0;
}

static void
BasicExecute_dealloc(BasicExecute *self)
{
    PyObject_GC_UnTrack(self);
    BasicExecute_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* what an ack of t sends its tree: t._val ^ t._oav, a new int */
static PyObject *
ack_value(TupleBase *t)
{
    return PyLong_FromUnsignedLongLong(t->val ^ t->oav);
}

/* acks[root] = acks.get(root, 0) ^ val ^ oav */
static int
hold_ack(PyObject *acks, PyObject *root, PyObject *val, PyObject *oav)
{
    PyObject *held = PyDict_GetItemWithError(acks, root);
    if (held == NULL && PyErr_Occurred())
        return -1;
    PyObject *v = held ? xor_of(held, val, oav) : xor_of(val, oav, NULL);
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItem(acks, root, v);
    Py_DECREF(v);
    return rc;
}

/* a == b for two roots: exact ints (squall's ids) compared by their digits, without the rich
 * comparison's dispatch (a root decoded from another worker is an int of its own, so the identity
 * check of PyObject_RichCompareBool misses: W1 on 2 workers made five such calls a sentence) */
static inline int
same_root(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
#if PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) {
        Py_ssize_t n = Py_SIZE(a);
        if (n != Py_SIZE(b))
            return 0;
        return memcmp(((PyLongObject *)a)->ob_digit, ((PyLongObject *)b)->ob_digit,
                      (size_t)(n < 0 ? -n : n) * sizeof(digit)) == 0;
    }
#endif
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* 1 when the first input waiting in the deque inbox has the root root, 0 when not (or empty) */
static int
sibling_next(PyObject *inbox, PyObject *root)
{
    Py_ssize_t n = PyObject_Size(inbox);
    if (n <= 0)
        return n < 0 ? -1 : 0;
    PyObject *next = PySequence_GetItem(inbox, 0);
    if (next == NULL) {  /* taken meanwhile by another thread: nothing next */
        PyErr_Clear();
        return 0;
    }
    int same = 0;
    if (is_a(next, &TupleBase_Type, &seen_tuple))
        same = same_root(((TupleBase *)next)->root, root);
    Py_DECREF(next);
    return same;
}

static int sender_put_message(PyObject *send, PyObject *const *fields, Py_ssize_t size);

/* the index in ackers (a non-empty list) of root's acker, root % len(ackers), and in *bits
 * root's 64 bits when it is such an id (*is_u64 1; else Python's remainder, as the Python
 * path); -1 with an error */
static Py_ssize_t
acker_index(PyObject *ackers, PyObject *root, unsigned long long *bits, int *is_u64)
{
    Py_ssize_t n = PyList_GET_SIZE(ackers), i;
    *is_u64 = u64_of(root, bits) == 0;
    if (*is_u64)
        return (Py_ssize_t)(*bits % (unsigned long long)n);
    PyObject *nk = PyLong_FromSsize_t(n);
    PyObject *idx = nk ? PyNumber_Remainder(root, nk) : NULL;
    Py_XDECREF(nk);
    i = idx ? PyLong_AsSsize_t(idx) : -1;
    Py_XDECREF(idx);
    if (i < 0 || i >= n) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_IndexError, "no acker for this root");
        return -1;
    }
    return i;
}

/* send((kind, root, x, -1)), send an acker's callable: written into its outbox when the acker
 * is in another worker (no tuple made), else called with the tuple */
static int
send_ack_to(PyObject *send, PyObject *kind, PyObject *root, PyObject *x)
{
    Py_INCREF(send);
    PyObject *fields[4] = {kind, root, x, MINUS_ONE};
    int put = sender_put_message(send, fields, 4);
    if (put <= 0) {
        Py_DECREF(send);
        return put;
    }
    PyObject *msg = PyTuple_Pack(4, kind, root, x, MINUS_ONE);
    PyObject *res = msg ? call_quick(send, msg) : NULL;
    Py_XDECREF(msg);
    Py_DECREF(send);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

/* ackers[root % len(ackers)]((kind, root, x, -1)): a bolt's ack of one tree, sent at once
 * (ackers a non-empty list) */
static int
send_ack(PyObject *ackers, PyObject *kind, PyObject *root, PyObject *x)
{
    unsigned long long r;
    int is_u64;
    Py_ssize_t i = acker_index(ackers, root, &r, &is_u64);
    return i < 0 ? -1 : send_ack_to(PyList_GET_ITEM(ackers, i), kind, root, x);
}

static int outbox_put_ack(PyObject *send, unsigned long long kind, unsigned long long root, unsigned long long x);

/* send_ack(ackers, kind, root, x) with x given as its 64 bits: an acker in another worker gets
 * the message written from them (no int made for x; W1 on 2 workers sends about one a
 * sentence), any other the message as send_ack makes it */
static int
send_ack_bits(PyObject *ackers, PyObject *kind, PyObject *root, unsigned long long x)
{
    unsigned long long r, k;
    int is_u64;
    Py_ssize_t i = acker_index(ackers, root, &r, &is_u64);
    if (i < 0)
        return -1;
    PyObject *send = PyList_GET_ITEM(ackers, i);
    if (is_u64 && u64_of(kind, &k) == 0) {
        int put = outbox_put_ack(send, k, r, x);
        if (put <= 0)
            return put;
    }
    PyObject *px = PyLong_FromUnsignedLongLong(x);
    if (px == NULL)
        return -1;
    int rc = send_ack_to(send, kind, root, px);
    Py_DECREF(px);
    return rc;
}

/* send every ack held in acks (root -> xor) to its acker, then forget them all (also when a
 * send fails: the Python path drops the rest too) */
static int
send_held(PyObject *acks, PyObject *ackers, PyObject *kind)
{
    Py_ssize_t pos = 0;
    PyObject *root, *x;
    int rc = 0;
    while (rc == 0 && PyDict_Next(acks, &pos, &root, &x)) {
        Py_INCREF(root);
        Py_INCREF(x);
        rc = send_ack(ackers, kind, root, x);
        Py_DECREF(root);
        Py_DECREF(x);
    }
    PyDict_Clear(acks);
    return rc;
}

/* current_frames(): sys._current_frames() with the garbage collector off, turned back on only if
 * it was on, all while this thread holds the GIL (squall.engine.thread_frames says why: on
 * CPython <= 3.11.8 a collection inside the call can freeze the process, python/cpython#106883).
 * In Python the three calls could not be one step: another thread ran between them, so a user's
 * gc.disable() made meanwhile was undone by the gc.enable() after (16 of 1,771 in a 30 s loop),
 * and a gc.enable() made meanwhile let a collection run inside the call again. Here no Python code
 * runs between them (no collection, so no finalizer; the call allocates only frames and a dict). */
static PyObject *
current_frames(PyObject *module, PyObject *unused)
{
    PyObject *read = PySys_GetObject("_current_frames");  /* borrowed */
    if (read == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "current_frames(): no sys._current_frames");
        return NULL;
    }
    Py_INCREF(read);
    int was_on = PyGC_Disable();
    PyObject *frames = PyObject_CallNoArgs(read);
    if (was_on)
        PyGC_Enable();
    Py_DECREF(read);
    return frames;
}

/* send_acks(acks, ackers, kind): `send_held` for the Python paths (BoltExecutor.flush_acks) */
/* own_methods(cls): each method of cls's compiled base (the first base in its MRO that is a static
 * type: BasicCollectorBase, BoltCollectorBase, SpoutCollectorBase) that cls does not override,
 * set again on cls as a method descriptor of cls. CPython 3.11 specialises a call of a C method
 * (`collector.emit(values)`) only when the instance's type is exactly the descriptor's type; an
 * engine collector is a Python subclass of its compiled base, so every such call took the
 * generic path (PRECALL stayed adaptive: W1's count bolt makes ten a sentence). The function
 * called is the same C function; only the descriptor's type differs. Returns the names set. */
static PyObject *
own_methods(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "own_methods(cls): a class defined in Python");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls, *base = NULL;
    PyObject *mro = type->tp_mro;
    for (Py_ssize_t i = 1; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(b->tp_flags & Py_TPFLAGS_HEAPTYPE) && b != &PyBaseObject_Type) {
            base = b;
            break;
        }
    }
    PyObject *names = PyList_New(0);
    if (names == NULL || base == NULL || base->tp_methods == NULL)
        return names;
    for (PyMethodDef *ml = base->tp_methods; ml->ml_name != NULL; ml++) {
        if (ml->ml_flags & (METH_CLASS | METH_STATIC))
            continue;
        PyObject *name = PyUnicode_InternFromString(ml->ml_name);
        PyObject *found = name ? _PyType_Lookup(type, name) : NULL;  /* borrowed */
        PyObject *inherited = name ? PyDict_GetItemWithError(base->tp_dict, name) : NULL;
        int rc = 0;
        if (name == NULL || PyErr_Occurred()) {
            rc = -1;
        } else if (found != NULL && found == inherited) {  /* not overridden on the way down */
            PyObject *descr = PyDescr_NewMethod(type, ml);
            rc = descr == NULL || PyObject_SetAttr(cls, name, descr) < 0 || PyList_Append(names, name) < 0 ? -1 : 0;
            Py_XDECREF(descr);
        }
        Py_XDECREF(name);
        if (rc < 0) {
            Py_DECREF(names);
            return NULL;
        }
    }
    return names;
}

static PyObject *
send_acks(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyList_Check(args[1]) || !PyList_GET_SIZE(args[1])) {
        PyErr_SetString(PyExc_TypeError, "send_acks(acks: dict, ackers: non-empty list, kind)");
        return NULL;
    }
    if (send_held(args[0], args[1], args[2]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The error set: fetched (its traceback kept on it) and handed to handler(item, exception); 0 when
 * the handler returned (no error set), -1 with the handler's error */
static int
hand_error_to(PyObject *handler, PyObject *item)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *r = PyObject_CallFunctionObjArgs(handler, item, value, NULL);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* the run of acks held in C, into acks (acks[root] ^= xor); 0, or -1 with an error */
static int
be_spill(BasicExecute *self)
{
    if (self->held_root == NULL)
        return 0;
    PyObject *root = self->held_root;
    self->held_root = NULL;
    PyObject *x = PyLong_FromUnsignedLongLong(self->held_x);
    int rc = x == NULL ? -1 : hold_ack(self->acks, root, x, ZERO);
    Py_XDECREF(x);
    Py_DECREF(root);
    return rc;
}

static PyObject *
BasicExecute_spill(BasicExecute *self, PyObject *Py_UNUSED(ignored))
{
    if (be_spill(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef BasicExecute_methods[] = {
    {"spill", (PyCFunction)BasicExecute_spill, METH_NOARGS,
     "Hand the acks held in C (a run of siblings) to the executor's dict of held acks."},
    {NULL}
};

static PyObject *
BasicExecute_call(BasicExecute *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "execute(tuple) takes one argument");
        return NULL;
    }
    PyObject *tup = args[0];
    BasicCollectorBase *basic = (BasicCollectorBase *)self->basic;
    Py_INCREF(tup);
    Py_XSETREF(basic->input, tup);
    /* a slot before the arguments: a bound method (the bolt's execute) puts its self there
     * instead of copying them (PY_VECTORCALL_ARGUMENTS_OFFSET) */
    PyObject *res;
    if (self->user_fn != NULL) {
        PyObject *uargs[4] = {NULL, self->user_self, tup, self->basic};
        res = self->user_call(self->user_fn, uargs + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    } else {
        PyObject *uargs[3] = {NULL, tup, self->basic};
        res = PyObject_Vectorcall(self->user_execute, uargs + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    if (res == NULL) {
        if (!PyErr_ExceptionMatches(self->failed_type) || hand_error_to(self->on_failed, tup) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    Py_DECREF(res);
    if (!is_a(tup, &TupleBase_Type, &seen_tuple) || !PyLong_CheckExact(((TupleBase *)tup)->root))
        return PyObject_CallOneArg(self->ack, tup);
    TupleBase *t = (TupleBase *)tup;
    PyObject *root = t->root;
    Py_INCREF(root);
    int tracked = is_tracked(root);
    Py_ssize_t nackers = PyList_GET_SIZE(self->ackers);
    if (tracked && nackers) {
        int rc = sibling_next(self->inbox, root);  /* 1: a sibling is next, hold and combine */
        if (rc >= 0 && self->held_root != NULL && self->held_root != root) {  /* siblings share their root's int */
            int same = same_root(self->held_root, root);
            rc = same < 0 ? -1 : same ? rc : be_spill(self) < 0 ? -1 : rc;
        }
        if (rc >= 0 && !PyDict_GET_SIZE(self->acks)) {  /* the run held in C */
            unsigned long long x = t->val ^ t->oav ^ (self->held_root != NULL ? self->held_x : 0);
            if (rc == 1) {
                if (self->held_root == NULL)
                    self->held_root = Py_NewRef(root);
                self->held_x = x;
            } else {  /* the run's last ack, or a tree of one: sent at once */
                Py_CLEAR(self->held_root);
                rc = send_ack_bits(self->ackers, self->ack_tag, root, x);
            }
        } else if (rc >= 0 && be_spill(self) < 0) {
            rc = -1;
        } else if (rc >= 0) {  /* acks held in the dict (spilled, or from another path): this one joins them */
            int last = rc == 0;  /* no sibling next: what is held goes out with this one */
            PyObject *x = ack_value(t);
            rc = x == NULL ? -1 : hold_ack(self->acks, root, x, ZERO);
            Py_XDECREF(x);
            if (rc == 0 && last)
                rc = send_held(self->acks, self->ackers, self->ack_tag);
        }
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(root);
    if (count(self->stats, &TaskStatsBase_Type, &seen_task_stats, offsetof(TaskStatsBase, acked), str_acked, 1) < 0)
        return NULL;
    if (self->sample_tup == tup) {  /* sampled by drain_inbox: its process latency, to this ack */
        PyObject *when = call_quick(self->now, NULL);  /* time.monotonic, called at once */
        double end = when == NULL ? -1.0 : PyFloat_AsDouble(when);
        Py_XDECREF(when);
        if (when == NULL || (end == -1.0 && PyErr_Occurred()))
            return NULL;
        KeyStatsBase *k = (KeyStatsBase *)self->sample_ks;
        k->acked += self->sample_freq;
        k->latency_ms += 1000.0 * (end - self->sample_start);
        k->latency_n += 1;
        Py_CLEAR(self->sample_tup);  /* closed: counted once */
        Py_CLEAR(self->sample_ks);
    } else if (PyDict_GET_SIZE(self->samples) && close_sample(self->samples, self->sampled, tup, 1, self->now) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
fail:
    Py_DECREF(root);
    return NULL;
}

static PyObject *
BasicExecute_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    BasicExecute *self = (BasicExecute *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (!PyArg_UnpackTuple(args, "BasicExecute", 13, 13, &self->user_execute, &self->basic, &self->ack,
                           &self->on_failed, &self->failed_type, &self->acks, &self->stats,
                           &self->samples, &self->sampled, &self->now, &self->inbox, &self->ackers,
                           &self->ack_tag)) {
        /* the fields are borrowed until here: forget them before the dealloc */
#define Z(f) self->f = NULL;
        BE_FIELDS(Z)
#undef Z
        Py_DECREF(self);
        return NULL;
    }
#define I(f) Py_INCREF(self->f);
    BE_FIELDS(I)
#undef I
    if (!is_a(self->basic, &BasicCollectorBase_Type, &seen_basic_collector) || !PyList_Check(self->ackers)
            || !PyDict_Check(self->acks) || !PyDict_Check(self->samples)) {
        PyErr_SetString(PyExc_TypeError, "BasicExecute needs a BasicCollectorBase, a dict of held acks "
                        "and a list of ackers");
        Py_DECREF(self);
        return NULL;
    }
    if (PyMethod_Check(self->user_execute)) {
        self->user_fn = Py_NewRef(PyMethod_GET_FUNCTION(self->user_execute));
        self->user_self = Py_NewRef(PyMethod_GET_SELF(self->user_execute));
        /* a Python function's vectorcall stays _PyFunction_Vectorcall for its life; anything
         * else is called through PyObject_Vectorcall, which checks what it returns */
        self->user_call = PyFunction_Check(self->user_fn) && PyVectorcall_Function(self->user_fn) != NULL
                          ? PyVectorcall_Function(self->user_fn) : PyObject_Vectorcall;
    }
    self->vectorcall = (vectorcallfunc)BasicExecute_call;
    return (PyObject *)self;
}

static PyTypeObject BasicExecute_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.BasicExecute",
    .tp_doc = "A BasicBolt's execute-then-ack (see squall.engine.bolt_executor._basic_execute).",
    .tp_basicsize = sizeof(BasicExecute),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(BasicExecute, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = BasicExecute_new,
    .tp_methods = BasicExecute_methods,
    .tp_traverse = (traverseproc)BasicExecute_traverse,
    .tp_clear = (inquiry)BasicExecute_clear,
    .tp_dealloc = (destructor)BasicExecute_dealloc,
};


/* ---------------------------------------------------------------------------------------------
 * The acker (squall.engine.acker): PendingTreeBase holds one tree's fields in C, and
 * acker_run(acker, pop, n, now, deliver) applies n messages popped from its inbox exactly as
 * n calls of Acker.update would, delivering each reply to deliver[spout_task].
 */
enum { INIT = 0, ACK = 1, FAIL = 2, RESET = 3 };          /* acker.INIT ... acker.RESET */
enum { ACKED = 1, FAILED = 2, RESET_TIMEOUT = 3 };         /* acker.ACKED ... */

typedef struct {
    PyObject_HEAD
    unsigned long long xor;  /* edge ids are 64 bits: xor in C, no Python int per message */
    long spout_task;
    double start;
    char failed;
    char reset;
    PyObject *cause;  /* the first FAIL's value (why the tree failed), told to the spout; NULL: None */
} PendingTreeBase;

static PyMemberDef PendingTreeBase_members[] = {
    {"xor", T_ULONGLONG, offsetof(PendingTreeBase, xor), 0, NULL},
    {"spout_task", T_LONG, offsetof(PendingTreeBase, spout_task), 0, NULL},
    {"start", T_DOUBLE, offsetof(PendingTreeBase, start), 0, NULL},
    {"failed", T_BOOL, offsetof(PendingTreeBase, failed), 0, NULL},
    {"reset", T_BOOL, offsetof(PendingTreeBase, reset), 0, NULL},
    {"cause", T_OBJECT, offsetof(PendingTreeBase, cause), 0, NULL},
    {NULL}
};

static void
PendingTreeBase_dealloc(PendingTreeBase *self)
{
    Py_CLEAR(self->cause);
    Py_TYPE(self)->tp_free((PyObject *)self);  /* a Python subclass's type: subtype_dealloc drops it */
}

static PyTypeObject PendingTreeBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.PendingTreeBase",
    .tp_doc = "The fields of squall.engine.acker.PendingTree.",
    .tp_basicsize = sizeof(PendingTreeBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,  /* numbers and a cause of str and int: no cycles */
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)PendingTreeBase_dealloc,
    .tp_members = PendingTreeBase_members,
};

static PyObject *str_pending, *str_buckets, *str_tree_type;

/* root removed from every bucket from first on: RotatingMap.put's effect on the older buckets
 * (buckets a list of dicts, newest first; a finished tree is deleted from the bucket that holds
 * it, acker_update) */
static int
drop_from(PyObject *buckets, Py_ssize_t first, PyObject *root, Py_hash_t hash)
{
    for (Py_ssize_t b = first; b < PyList_GET_SIZE(buckets); b++) {
        PyObject *d = PyList_GET_ITEM(buckets, b);
        int has = DICT_CONTAINS_H(d, root, hash);
        if (has < 0 || (has && DICT_DEL_H(d, root, hash) < 0))
            return -1;
    }
    return 0;
}

/* The roots of the trees this process's ackers are tracking, each at a slot its value picks: a
 * root decoded from another worker's message (a bolt there acking a word this worker's spout
 * emitted) is then the acker's own int rather than an equal one made for it, so the acker's and
 * the spout's dict probes find it by identity (an equal int of its own cost a rich comparison
 * at each of them, and an int made and freed). Bounded: the table holds at most ROOTS_SEEN
 * ints, a root being replaced by a later one at its slot, and forgotten when its tree ends. */
#define ROOTS_SEEN 4096
static PyObject *roots_seen[ROOTS_SEEN];
/* set once this process has decoded an acker message from another worker: until then (one
 * worker, LocalCluster) no root is remembered, which cost one worker's W1 about 1.5% for nothing */
static int roots_from_elsewhere;

static inline Py_ssize_t
root_slot(unsigned long long r)
{
    return (Py_ssize_t)((r * SPLITMIX_GAMMA) >> 52);  /* the top 12 bits of a multiplicative hash */
}

/* root's slot emptied if it holds root: a tree's root is held here only while the tree is
 * pending (the acker's map holds it anyway), not kept alive past its end (freed later and cold,
 * it made one worker's W1 about 4% slower) */
static inline void
forget_root(PyObject *root)
{
    unsigned long long r;
    if (u64_of(root, &r) == 0 && roots_seen[root_slot(r)] == root)
        Py_CLEAR(roots_seen[root_slot(r)]);
}

/* an int with the value r: the acker's own while it tracks that tree; a new reference */
static PyObject *
root_of_bits(unsigned long long r)
{
    PyObject *seen = roots_seen[root_slot(r)];
    if (seen != NULL && as_u64(seen) == r)
        return Py_NewRef(seen);
    return PyLong_FromUnsignedLongLong(r);
}

/* (kind, root, delta) to the spout task; a FAILED reply carries the tree's cause (or None) in
 * delta's place */
static int
reply_to(DeliverCache *c, PyObject *deliver, long task, long kind, PyObject *root, double delta, PyObject *cause)
{
    PyObject *t = PyLong_FromLong(task);
    if (t == NULL)
        return -1;
    PyObject *msg = PyTuple_New(3);  /* (kind, root, delta), without Py_BuildValue's format parsing */
    PyObject *k = msg ? PyLong_FromLong(kind) : NULL;
    PyObject *d = k == NULL ? NULL : kind == FAILED ? Py_NewRef(cause ? cause : Py_None) : PyFloat_FromDouble(delta);
    if (d == NULL) {
        Py_XDECREF(k);
        Py_CLEAR(msg);
    } else {
        PyTuple_SET_ITEM(msg, 0, k);
        PyTuple_SET_ITEM(msg, 1, Py_NewRef(root));
        PyTuple_SET_ITEM(msg, 2, d);
    }
    int rc = msg ? deliver_cached(c, deliver, t, msg) : -1;
    Py_XDECREF(msg);
    Py_DECREF(t);
    return rc;
}

/* One message; 0, or -1 with an exception set. */
static int
acker_update(PyObject *buckets, PyTypeObject *tree_type, PyObject *msg, double now, PyObject *deliver,
             DeliverCache *sent)
{
    if (!PyTuple_CheckExact(msg) || PyTuple_GET_SIZE(msg) != 4) {
        PyErr_Format(PyExc_TypeError, "an acker message is (kind, root, value, spout_task), got %R", msg);
        return -1;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(msg, 0));
    PyObject *root = PyTuple_GET_ITEM(msg, 1), *val = PyTuple_GET_ITEM(msg, 2);
    long spout_task = PyLong_AsLong(PyTuple_GET_ITEM(msg, 3));
    if ((kind == -1 || spout_task == -1) && PyErr_Occurred())
        return -1;
    if (PyList_GET_SIZE(buckets) < 1)
        return 0;
    PyObject *newest = PyList_GET_ITEM(buckets, 0);
    Py_hash_t hash = PyObject_Hash(root);  /* once for the message's look-ups, store and removal */
    if (hash == -1)
        return -1;
    PyObject *e = DICT_GET_H(newest, root, hash);  /* nearly always there */
    Py_ssize_t at = 0;  /* the bucket that holds the root's entry */
    for (Py_ssize_t b = 1; e == NULL && !PyErr_Occurred() && b < PyList_GET_SIZE(buckets); b++)
        e = DICT_GET_H(PyList_GET_ITEM(buckets, (at = b)), root, hash);
    if (e == NULL) {
        if (PyErr_Occurred())
            return -1;
        at = 0;  /* first message of this root: its entry goes into the newest bucket */
        PendingTreeBase *fresh = (PendingTreeBase *)tree_type->tp_alloc(tree_type, 0);
        if (fresh == NULL)
            return -1;
        fresh->xor = 0;
        fresh->spout_task = -1;
        fresh->start = now;
        unsigned long long r;
        if (roots_from_elsewhere && kind == INIT && u64_of(root, &r) == 0)  /* the spout's own int, for its messages from elsewhere */
            Py_XSETREF(roots_seen[root_slot(r)], Py_NewRef(root));
        if (DICT_SET_H(newest, root, (PyObject *)fresh, hash) < 0) {
            Py_DECREF(fresh);
            return -1;
        }
        e = (PyObject *)fresh;  /* the dict holds it; our reference is taken below */
    } else {
        Py_INCREF(e);
    }
    PendingTreeBase *entry = (PendingTreeBase *)e;  /* a new reference from here on */
    int rc = -1;
    if (kind == ACK || kind == INIT) {
        unsigned long long x = as_u64(val);
        if (x == (unsigned long long)-1 && PyErr_Occurred())
            goto done;
        entry->xor ^= x;
        if (kind == INIT)
            entry->spout_task = spout_task;
    } else if (kind == FAIL || kind == RESET) {
        if (kind == FAIL) {
            entry->failed = 1;
            if ((entry->cause == NULL || entry->cause == Py_None) && PyTuple_CheckExact(val))  /* the first told is kept */
                Py_XSETREF(entry->cause, Py_NewRef(val));
        } else
            entry->reset = 1;
        if (DICT_SET_H(newest, root, e, hash) < 0 || drop_from(buckets, 1, root, hash) < 0)
            goto done;
        at = 0;
    }
    rc = 0;
    long task = entry->spout_task;
    if (task < 0)
        goto done;  /* init not seen yet: an ack or fail overtook it */
    int nonzero = entry->xor != 0;
    if (!nonzero || entry->failed) {
        /* removed from the bucket it was found in, with no test of the buckets before it */
        if (roots_from_elsewhere)
            forget_root(root);
        if (DICT_DEL_H(PyList_GET_ITEM(buckets, at), root, hash) < 0)
            rc = -1;
        else
            rc = reply_to(sent, deliver, task, nonzero ? FAILED : ACKED, root, now - entry->start, entry->cause);
    } else if (entry->reset) {
        entry->reset = 0;
        rc = reply_to(sent, deliver, task, RESET_TIMEOUT, root, now - entry->start, NULL);
    }
done:
    Py_DECREF(e);
    return rc;
}

static PyObject *
acker_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "acker_run(acker, pop, n, now, deliver)");
        return NULL;
    }
    PyObject *acker = args[0], *pop = args[1], *deliver = args[4];
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    double now = PyFloat_AsDouble(args[3]);
    if ((n == -1 || now == -1.0) && PyErr_Occurred())
        return NULL;
    PyObject *pending = PyObject_GetAttr(acker, str_pending);
    PyObject *buckets = pending ? PyObject_GetAttr(pending, str_buckets) : NULL;
    PyObject *tree_type = PyObject_GetAttr(acker, str_tree_type);
    Py_XDECREF(pending);
    if (buckets == NULL || tree_type == NULL || !PyList_Check(buckets) || !PyType_Check(tree_type) ||
        !PyType_IsSubtype((PyTypeObject *)tree_type, &PendingTreeBase_Type) || !PyDict_Check(deliver)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "acker_run needs an Acker (buckets, PendingTree) and a dict of senders");
        Py_XDECREF(buckets);
        Py_XDECREF(tree_type);
        return NULL;
    }
    PyObject *result = Py_None;
    DeliverCache sent = {0};  /* the spout tasks replied to last, for this call */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = call_quick(pop, NULL);
        if (msg == NULL) {
            result = NULL;
            break;
        }
        int rc = acker_update(buckets, (PyTypeObject *)tree_type, msg, now, deliver, &sent);
        Py_DECREF(msg);
        if (rc < 0) {
            result = NULL;
            break;
        }
    }
    DELIVER_CACHE_CLEAR(sent);
    Py_DECREF(buckets);
    Py_DECREF(tree_type);
    Py_XINCREF(result);
    return result;
}


/* ---------------------------------------------------------------------------------------------
 * acker_drain(acker, pop, n, now, deliver, sampled, key_of): an acker task's n messages with
 * Storm's sampled statistics, as its twin in squall._native (AckerExecutor.drain). A sampled
 * message went through the Python Acker.update and the Python loop around it: 9% of W2's loop
 * (py-spy) for one message in 20. Here it is applied as the others are, and counted in its
 * KeyStats (sampled.by_handle's, else key_of(kind, spout_task)'s).
 */
static PyObject *
acker_sample_key(PyObject *by_handle, PyObject *key_of, PyObject *msg)
{
    PyObject *kind = PyTuple_GET_ITEM(msg, 0), *spout_task = PyTuple_GET_ITEM(msg, 3);
    long k = PyLong_AsLong(kind);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    PyObject *handle = k == INIT ? PyTuple_Pack(2, kind, spout_task) : Py_NewRef(kind);
    if (handle == NULL)
        return NULL;
    PyObject *ks = PyDict_GetItemWithError(by_handle, handle);
    Py_DECREF(handle);
    if (ks != NULL)
        return Py_NewRef(ks);
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallFunctionObjArgs(key_of, kind, spout_task, NULL);
}

static PyObject *
acker_drain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "acker_drain(acker, pop, n, now, deliver, sampled, key_of)");
        return NULL;
    }
    PyObject *acker = args[0], *pop = args[1], *deliver = args[4], *sampled = args[5], *key_of = args[6];
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    double now = PyFloat_AsDouble(args[3]);
    if ((n == -1 || now == -1.0) && PyErr_Occurred())
        return NULL;
    PyObject *pending = PyObject_GetAttr(acker, str_pending);
    PyObject *buckets = pending ? PyObject_GetAttr(pending, str_buckets) : NULL;
    PyObject *tree_type = PyObject_GetAttr(acker, str_tree_type);
    PyObject *gaps = slot_get(sampled, str_gaps, &slot_gaps);
    PyObject *by_handle = slot_get(sampled, str_by_handle, &slot_by_handle);
    PyObject *o = slot_get(sampled, str_left, &slot_left);
    long long left = o ? PyLong_AsLongLong(o) : -1;
    Py_XDECREF(o);
    o = slot_get(sampled, str_freq, &slot_freq);
    long long freq = o ? PyLong_AsLongLong(o) : -1;
    Py_XDECREF(o);
    Py_XDECREF(pending);
    PyObject *result = NULL;
    if (PyErr_Occurred())
        goto done;
    if (buckets == NULL || tree_type == NULL || gaps == NULL || by_handle == NULL || !PyList_Check(buckets) ||
            !PyType_Check(tree_type) || !PyType_IsSubtype((PyTypeObject *)tree_type, &PendingTreeBase_Type) ||
            !PyDict_Check(deliver) || !PyDict_Check(by_handle)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "acker_drain needs an Acker (buckets, PendingTree), a dict of senders "
                            "and a TaskStatistics");
        goto done;
    }
    Py_ssize_t ran = 0;
    int failed = 0;
    DeliverCache sent = {0};  /* the spout tasks replied to last, for this call */
    while (ran < n && !failed) {
        PyObject *msg = call_quick(pop, NULL);
        if (msg == NULL) {
            failed = 1;
            break;
        }
        if (acker_update(buckets, (PyTypeObject *)tree_type, msg, now, deliver, &sent) < 0) {
            Py_DECREF(msg);
            failed = 1;
            break;
        }
        ran++;
        if (--left > 0) {
            Py_DECREF(msg);
            continue;
        }
        /* the sampled message of its block (acker_update checked it is a 4-tuple) */
        PyObject *ks = acker_sample_key(by_handle, key_of, msg);
        Py_DECREF(msg);
        if (ks == NULL || count(ks, &KeyStatsBase_Type, &seen_key_stats, offsetof(KeyStatsBase, executed), str_executed, freq) < 0)
            failed = 1;
        Py_XDECREF(ks);
        left = failed ? -1 : next_gap(gaps);
        if (left == -1 && PyErr_Occurred())
            failed = 1;
    }
    /* sampled.left = left, also on an exception, which stays the one raised */
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    if (failed)
        PyErr_Fetch(&type, &value, &tb);
    DELIVER_CACHE_CLEAR(sent);
    PyObject *l = left >= 0 ? PyLong_FromLongLong(left) : NULL;
    int rc = l ? slot_set(sampled, str_left, l, &slot_left) : -1;
    Py_XDECREF(l);
    if (failed) {
        if (rc < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
    } else if (rc == 0) {
        result = PyLong_FromSsize_t(ran);
    }
done:
    Py_XDECREF(buckets);
    Py_XDECREF(tree_type);
    Py_XDECREF(gaps);
    Py_XDECREF(by_handle);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * spout_replies(executor, pop, n, now): n replies (kind, root, delta_secs) from the spout's
 * inbox, as n calls of SpoutExecutor._reply would; an ACKED one is handled here (pending entry
 * removed, statistics, the spout's ack), any other goes to _reply.
 */
static PyObject *str_reply, *str_in_flight, *str_current_task, *str_objs, *str_stats, *str_ack,
                *str_latency_sum, *str_latency_count, *str_sampled;

static int
add_to_attr(PyObject *obj, PyObject *name, PyObject *by)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    PyObject *w = PyNumber_Add(v, by);
    Py_DECREF(v);
    if (w == NULL)
        return -1;
    int rc = PyObject_SetAttr(obj, name, w);
    Py_DECREF(w);
    return rc;
}

/* The statistics of the root's stream (a KeyStats) of a spout task: the one of the previous reply
 * when the task and stream are the same objects (nearly always), else sampled[task].by_handle's,
 * else sampled[task].key("", stream, stream). Borrowed from *ks, which holds it. */
typedef struct {
    PyObject *task, *stream, *ks;  /* held */
    /* the TaskStats and spout object of the task of the previous reply (one spout_replies call
     * is one task's replies: two look-ups by task a reply spared) */
    PyObject *st_task, *st, *obj;  /* held */
} StreamStatsCache;

static PyObject *
stream_stats(PyObject *sampled, PyObject *task, PyObject *stream, StreamStatsCache *c)
{
    if (c->ks != NULL && c->task == task && c->stream == stream)
        return c->ks;
    PyObject *ts = PyDict_GetItemWithError(sampled, task);
    if (ts == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, task);
        return NULL;
    }
    PyObject *by_handle = PyObject_GetAttr(ts, str_by_handle);
    if (by_handle == NULL)
        return NULL;
    PyObject *ks = PyDict_Check(by_handle) ? PyDict_GetItemWithError(by_handle, stream) : NULL;
    Py_XINCREF(ks);
    Py_DECREF(by_handle);
    if (ks == NULL) {
        if (PyErr_Occurred())
            return NULL;
        ks = PyObject_CallMethod(ts, "key", "sOO", "", stream, stream);
        if (ks == NULL)
            return NULL;
    }
    Py_XSETREF(c->ks, ks);
    Py_INCREF(task);
    Py_XSETREF(c->task, task);
    Py_INCREF(stream);
    Py_XSETREF(c->stream, stream);
    return ks;
}

static int
spout_acked(PyObject *executor, PyObject *buckets, PyObject *stats, PyObject *objs, PyObject *now,
            PyObject *root, PyObject **last_task, PyObject *sampled, StreamStatsCache *cache, int sample)
{
    PyObject *info = NULL;
    Py_hash_t hash = PyObject_Hash(root);  /* once for the look-ups and the removal */
    if (hash == -1)
        return -1;
    for (Py_ssize_t b = 0; b < PyList_GET_SIZE(buckets); b++) {  /* RotatingMap.remove */
        PyObject *d = PyList_GET_ITEM(buckets, b);
        info = DICT_GET_H(d, root, hash);
        if (info != NULL) {
            Py_INCREF(info);
            if (DICT_DEL_H(d, root, hash) < 0) {
                Py_DECREF(info);
                return -1;
            }
            break;
        }
        if (PyErr_Occurred())
            return -1;
    }
    if (info == NULL)
        return 0;  /* late reply for a tuple that already timed out */
    int rc = -1;
    PyObject *latency = NULL, *t = NULL;
    if (!PyTuple_CheckExact(info) || PyTuple_GET_SIZE(info) != 4) {
        PyErr_Format(PyExc_TypeError, "a spout's pending entry is (msg_id, task, stream, started), got %R", info);
        goto done;
    }
    if (count(executor, &SpoutExecutorBase_Type, &seen_spout_executor, offsetof(SpoutExecutorBase, in_flight), str_in_flight, -1) < 0)
        goto done;
    PyObject *msg_id = PyTuple_GET_ITEM(info, 0), *task = PyTuple_GET_ITEM(info, 1);
    if (task != *last_task) {
        if (PyObject_SetAttr(executor, str_current_task, task) < 0)
            goto done;
        Py_INCREF(task);
        Py_XSETREF(*last_task, task);  /* held: an id freed and reused would fool the identity test */
    }
    PyObject *st, *obj;
    if (cache->st != NULL && cache->st_task == task) {
        st = cache->st;
        obj = cache->obj;
    } else {
        st = PyDict_GetItemWithError(stats, task);
        obj = st ? PyDict_GetItemWithError(objs, task) : NULL;
        if (obj == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, task);
            goto done;
        }
        Py_XSETREF(cache->st_task, Py_NewRef(task));
        Py_XSETREF(cache->st, Py_NewRef(st));
        Py_XSETREF(cache->obj, Py_NewRef(obj));
    }
    t = PyObject_CallNoArgs(now);
    latency = t ? PyNumber_Subtract(t, PyTuple_GET_ITEM(info, 3)) : NULL;
    if (latency == NULL)
        goto done;
    if (is_a(st, &TaskStatsBase_Type, &seen_task_stats) && PyFloat_CheckExact(latency)) {
        TaskStatsBase *ts = (TaskStatsBase *)st;
        ts->acked++;
        ts->latency_sum += PyFloat_AS_DOUBLE(latency);
        ts->latency_count++;
    } else if (add_to_attr(st, str_acked, ONE) < 0 || add_to_attr(st, str_latency_sum, latency) < 0 ||
               add_to_attr(st, str_latency_count, ONE) < 0) {
        goto done;
    }
    /* the statistics' count of acked trees is exact, every one counted (only latencies are sampled) */
    PyObject *ks = stream_stats(sampled, task, PyTuple_GET_ITEM(info, 2), cache);
    if (ks == NULL || count(ks, &KeyStatsBase_Type, &seen_key_stats, offsetof(KeyStatsBase, acked), str_acked, 1) < 0)
        goto done;
    if (sample) {  /* a sampled tree: its complete latency goes into the stream's average */
        if (!is_a(ks, &KeyStatsBase_Type, &seen_key_stats)) {
            PyErr_SetString(PyExc_TypeError, "a spout's sampled statistics need a KeyStats");
            goto done;
        }
        /* any real number, as the Python reply takes it: a simulated clock of whole seconds gave
         * an int, and its first sampled ack crashed the worker (the Trident window tests hung) */
        double secs = PyFloat_CheckExact(latency) ? PyFloat_AS_DOUBLE(latency) : PyFloat_AsDouble(latency);
        if (secs == -1.0 && PyErr_Occurred())
            goto done;
        ((KeyStatsBase *)ks)->latency_ms += 1000.0 * secs;
        ((KeyStatsBase *)ks)->latency_n++;
    }
    Py_INCREF(obj);  /* the spout's ack may run anything */
    PyObject *r = PyObject_CallMethodOneArg(obj, str_ack, msg_id);
    Py_DECREF(obj);
    if (r == NULL)
        goto done;
    Py_DECREF(r);
    rc = 0;
done:
    Py_XDECREF(t);
    Py_XDECREF(latency);
    Py_DECREF(info);
    return rc;
}

static PyObject *
spout_replies(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "spout_replies(executor, pop, n, now, task_sampled=None)");
        return NULL;
    }
    PyObject *executor = args[0], *pop = args[1], *now = args[3];
    PyObject *task_sampled = nargs == 5 && args[4] != Py_None ? args[4] : NULL;
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    /* with task_sampled (the task's TaskStatistics): its countdown, one reply in a gap sampled */
    long long left = LLONG_MAX;
    PyObject *gaps = NULL;
    if (task_sampled != NULL) {
        PyObject *o = slot_get(task_sampled, str_left, &slot_left);
        left = o ? PyLong_AsLongLong(o) : -1;
        Py_XDECREF(o);
        if (left == -1 && PyErr_Occurred())
            return NULL;
        gaps = slot_get(task_sampled, str_gaps, &slot_gaps);
        if (gaps == NULL)
            return NULL;
    }
    PyObject *pending = PyObject_GetAttr(executor, str_pending);
    PyObject *buckets = pending ? PyObject_GetAttr(pending, str_buckets) : NULL;
    PyObject *stats = PyObject_GetAttr(executor, str_stats);
    PyObject *objs = PyObject_GetAttr(executor, str_objs);
    PyObject *reply = PyObject_GetAttr(executor, str_reply);
    PyObject *sampled = PyObject_GetAttr(executor, str_sampled);
    PyObject *result = NULL, *last_task = NULL;
    StreamStatsCache cache = {NULL, NULL, NULL, NULL, NULL, NULL};
    Py_XDECREF(pending);
    if (buckets == NULL || stats == NULL || objs == NULL || reply == NULL || sampled == NULL)
        goto done;
    if (!PyList_Check(buckets) || !PyDict_Check(stats) || !PyDict_Check(objs) || !PyDict_Check(sampled)) {
        PyErr_SetString(PyExc_TypeError, "spout_replies needs a SpoutExecutor");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int sample = --left == 0;
        if (sample) {  /* the gap drawn before the sampled reply is handled, as the Python drain did */
            left = next_gap(gaps);
            if (left == -1 && PyErr_Occurred())
                goto done;
        }
        PyObject *msg = call_quick(pop, NULL);
        if (msg == NULL)
            goto done;
        int rc;
        if (PyTuple_CheckExact(msg) && PyTuple_GET_SIZE(msg) == 3 && PyLong_CheckExact(PyTuple_GET_ITEM(msg, 0)) &&
                PyLong_AsLong(PyTuple_GET_ITEM(msg, 0)) == ACKED) {
            rc = spout_acked(executor, buckets, stats, objs, now, PyTuple_GET_ITEM(msg, 1), &last_task, sampled, &cache,
                             sample);
        } else {  /* failed, timeout reset, or not a reply: Python's rules and errors */
            Py_CLEAR(last_task);  /* _reply sets current_task itself */
            PyObject *r;
            if (sample && PyTuple_Check(msg) && PyTuple_GET_SIZE(msg) == 3) {
                PyObject *call[4] = {PyTuple_GET_ITEM(msg, 0), PyTuple_GET_ITEM(msg, 1), PyTuple_GET_ITEM(msg, 2), Py_True};
                r = PyObject_Vectorcall(reply, call, 4, NULL);
            } else {
                r = PyTuple_Check(msg) ? PyObject_Call(reply, msg, NULL) : PyObject_CallOneArg(reply, msg);
            }
            rc = r ? 0 : -1;
            Py_XDECREF(r);
        }
        Py_DECREF(msg);
        if (rc < 0)
            goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    if (task_sampled != NULL) {  /* task_sampled.left = left, also on an exception, which stays the one raised */
        PyObject *type = NULL, *value = NULL, *tb = NULL;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *l = left >= 0 ? PyLong_FromLongLong(left) : NULL;
        int set = l ? slot_set(task_sampled, str_left, l, &slot_left) : -1;
        Py_XDECREF(l);
        if (type != NULL) {
            if (set < 0)
                PyErr_Clear();
            PyErr_Restore(type, value, tb);
        } else if (set < 0) {
            Py_CLEAR(result);
        }
    }
    Py_XDECREF(gaps);
    Py_XDECREF(last_task);
    Py_XDECREF(cache.task);
    Py_XDECREF(cache.stream);
    Py_XDECREF(cache.ks);
    Py_XDECREF(cache.st_task);
    Py_XDECREF(cache.st);
    Py_XDECREF(cache.obj);
    Py_XDECREF(buckets);
    Py_XDECREF(stats);
    Py_XDECREF(objs);
    Py_XDECREF(reply);
    Py_XDECREF(sampled);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * spout_produce(executor, calls, budget, throttle): SpoutExecutor.produce's rounds of next_tuple
 * calls (its twin in squall._native says the rules). W2's spout ran them in a Python frame, 13%
 * of its loop's time (py-spy): a for, a set of current_task and three compares per tuple.
 */
static PyObject *str_max_pending, *str_throttled;
static SlotCache slot_throttled;

/* f(), f a spout's next_tuple: a bound method of a Python function is that function called with
 * its instance, through the function's own vectorcall (the bound method's call and the result
 * check spared: about 50 instructions a call) */
static inline PyObject *
call_method_quick(PyObject *f)
{
    if (PyMethod_Check(f)) {
        PyObject *fn = PyMethod_GET_FUNCTION(f);
        if (PyFunction_Check(fn)) {
            PyObject *args[2] = {NULL, PyMethod_GET_SELF(f)};
            return PyVectorcall_Function(fn)(fn, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
    }
    return PyObject_CallNoArgs(f);
}

static PyObject *
spout_produce(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "spout_produce(executor, calls: list, budget, throttle)");
        return NULL;
    }
    PyObject *ex = args[0], *calls = args[1], *throttle = args[3];
    if (!is_a(ex, &SpoutExecutorBase_Type, &seen_spout_executor)) {
        PyErr_SetString(PyExc_TypeError, "spout_produce needs a SpoutExecutor");
        return NULL;
    }
    SpoutExecutorBase *s = (SpoutExecutorBase *)ex;
    Py_ssize_t budget = PyLong_AsSsize_t(args[2]);
    if (budget == -1 && PyErr_Occurred())
        return NULL;
    PyObject *mp = PyObject_GetAttr(ex, str_max_pending);
    long long max_pending = mp == NULL ? -1 : mp == Py_None ? 0 : PyLong_AsLongLong(mp);
    Py_XDECREF(mp);
    if (max_pending == -1 && PyErr_Occurred())
        return NULL;
    long long start = s->emits;
    Py_ssize_t ncalls = PyList_GET_SIZE(calls);
    for (Py_ssize_t round = 0; round < budget; round++) {
        long long before = s->emits;
        for (Py_ssize_t i = 0; i < ncalls && i < PyList_GET_SIZE(calls); i++) {
            PyObject *call = PyList_GET_ITEM(calls, i);
            if (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) != 2) {
                PyErr_SetString(PyExc_TypeError, "spout_produce's calls are (task, next_tuple) pairs");
                return NULL;
            }
            Py_INCREF(call);
            /* one task: current_task stays its own for the whole burst (nothing else on this
               thread sets it during next_tuple), so it is set once */
            int rc = (ncalls > 1 || round == 0) ? PyObject_SetAttr(ex, str_current_task, PyTuple_GET_ITEM(call, 0)) : 0;
            PyObject *r = rc < 0 ? NULL : call_method_quick(PyTuple_GET_ITEM(call, 1));
            Py_DECREF(call);
            if (r == NULL)
                return NULL;
            Py_DECREF(r);
        }
        if (s->emits == before || (max_pending && s->in_flight >= max_pending))
            break;
        PyObject *t = slot_get(throttle, str_throttled, &slot_throttled);
        int throttled = t == NULL ? -1 : t == Py_False ? 0 : t == Py_True ? 1 : PyObject_IsTrue(t);
        Py_XDECREF(t);
        if (throttled < 0)
            return NULL;
        if (throttled)
            break;
    }
    return PyLong_FromLongLong(s->emits - start);
}

/* ---------------------------------------------------------------------------------------------
 * MemoChooser(memo, index, slow, choices): the fields grouping's choice for one str key
 * (_grouping.FieldsGrouping.chooser). Calling it with a tuple's values returns the choice for
 * values[index] when that value is a str: computed here for an ASCII str (its text is its UTF-8),
 * remembered in memo for another str; anything else goes to slow(values), the Python chooser,
 * which computes the choice (and fills the same memo for a str).
 *
 * An ASCII key's choice is computed, not looked up, because the look-up was the slower: a
 * vocabulary's memo (W1: 10,000 words) does not stay in a core's caches beside the rest of a
 * worker, and its look-up was 5.7% of each worker's time on 2 workers (perf, W1), where CRC-32
 * over a word's few bytes, from a 1 KB table, is a few nanoseconds. The choice is the Python
 * chooser's: choices[(crc32(key as UTF-8) * _MIX mod 2**64 >> 32) % len(choices)]
 * (squall._stable_hash); zlib's CRC-32 is written out here so the build needs no zlib headers.
 */
/* four tables (slicing-by-4): four bytes of a word are looked up at once rather than one after
 * another, each waiting for the last (perf, W1 on 2 workers: the choice was 2.5% of a worker's
 * time, most of it that chain and a 64-bit division, against about 90 instructions a word) */
static uint32_t crc32_table[4][256];

static void
crc32_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc32_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 4; t++)
            crc32_table[t][i] = (crc32_table[t - 1][i] >> 8) ^ crc32_table[0][crc32_table[t - 1][i] & 0xFF];
}

static uint32_t
crc32_of(const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 4; n -= 4, p += 4) {
        c ^= (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        c = crc32_table[3][c & 0xFF] ^ crc32_table[2][(c >> 8) & 0xFF] ^
            crc32_table[1][(c >> 16) & 0xFF] ^ crc32_table[0][c >> 24];
    }
    while (n-- > 0)
        c = crc32_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

#define STABLE_HASH_MIX 0x9E3779B97F4A7C15ULL  /* squall._stable_hash._MIX */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *memo, *slow, *choices;
    Py_ssize_t index;
    uint64_t mod_n, mod_m;  /* mod_m: fastmod's multiplier for a divisor of mod_n (0: none yet) */
} MemoChooser;

/* a % d for 32-bit a and d > 0, by two multiplications with m = 2**64 / d rounded up (Lemire,
 * "Faster remainder by direct computation", 2019: exact for every 32-bit a and d), in place of
 * a division that costs tens of cycles on every emit */
static inline uint64_t
fastmod_u32(uint32_t a, uint64_t m, uint32_t d)
{
    return (uint64_t)(((__uint128_t)(m * a) * d) >> 64);
}

static int
MemoChooser_traverse(MemoChooser *self, visitproc visit, void *arg)
{
    Py_VISIT(self->memo);
    Py_VISIT(self->slow);
    Py_VISIT(self->choices);
    return 0;
}

static int
MemoChooser_clear(MemoChooser *self)
{
    Py_CLEAR(self->memo);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->choices);
    return 0;
}

static void
MemoChooser_dealloc(MemoChooser *self)
{
    PyObject_GC_UnTrack(self);
    MemoChooser_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* the choice for v, an exact str, when it is ASCII (borrowed), or NULL (no error) for the memo's
 * path: MemoChooser_call's, and choose_targets' inline for an emit's list, without the vectorcall's
 * argument checks and a call's frame a word */
static inline PyObject *
memo_ascii_choice(MemoChooser *self, PyObject *v)
{
    if (!PyUnicode_IS_COMPACT_ASCII(v))  /* ready, and its characters are its bytes, after its header */
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(self->choices);
    if ((uint64_t)n != self->mod_n) {  /* the choices' count checked once, when it changes */
        if (n <= 0 || n > 0xFFFFFFFF)
            return NULL;
        self->mod_n = (uint64_t)n;
        self->mod_m = UINT64_MAX / (uint64_t)n + 1;
    }
    uint64_t h = (uint64_t)crc32_of((const unsigned char *)((PyASCIIObject *)v + 1), PyUnicode_GET_LENGTH(v)) *
                 STABLE_HASH_MIX;
    return PyList_GET_ITEM(self->choices, (Py_ssize_t)fastmod_u32((uint32_t)(h >> 32), self->mod_m, (uint32_t)n));
}

static PyObject *
MemoChooser_call(MemoChooser *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *v = NULL;
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL) {
        PyObject *values = args[0];
        if (PyList_CheckExact(values)) {
            if (self->index < PyList_GET_SIZE(values))
                v = PyList_GET_ITEM(values, self->index);
        } else if (PyTuple_CheckExact(values) && self->index < PyTuple_GET_SIZE(values)) {
            v = PyTuple_GET_ITEM(values, self->index);
        }
    }
    if (v == NULL || !PyUnicode_CheckExact(v))
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    PyObject *got = memo_ascii_choice(self, v);
    if (got != NULL)
        return Py_NewRef(got);
    got = PyDict_GetItemWithError(self->memo, v);  /* another str */
    if (got != NULL)
        return Py_NewRef(got);
    if (PyErr_Occurred())
        return NULL;
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *
MemoChooser_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *memo, *slow, *choices;
    Py_ssize_t index;
    if (!PyArg_ParseTuple(args, "O!nOO!:MemoChooser", &PyDict_Type, &memo, &index, &slow, &PyList_Type, &choices))
        return NULL;
    if (index < 0) {
        PyErr_SetString(PyExc_ValueError, "MemoChooser: index must be >= 0");
        return NULL;
    }
    MemoChooser *self = (MemoChooser *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)MemoChooser_call;
    self->memo = Py_NewRef(memo);
    self->slow = Py_NewRef(slow);
    self->choices = Py_NewRef(choices);
    self->index = index;
    return (PyObject *)self;
}

static PyTypeObject MemoChooser_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.MemoChooser",
    .tp_basicsize = sizeof(MemoChooser),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "MemoChooser(memo, index, slow, choices): the choice for a str key values[index] (computed for "
              "an ASCII one, else memo[key] if there), else slow(values).",
    .tp_vectorcall_offset = offsetof(MemoChooser, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = MemoChooser_new,
    .tp_traverse = (traverseproc)MemoChooser_traverse,
    .tp_clear = (inquiry)MemoChooser_clear,
    .tp_dealloc = (destructor)MemoChooser_dealloc,
};

/* ---------------------------------------------------------------------------------------------
 * NextChooser(next): a chooser that ignores the values and returns next() (the shuffle
 * grouping's round-robin, _grouping.ShuffleGrouping.chooser), without a Python frame per emit.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *next;
    /* when next is the __next__ of an iterator of a compiled type (itertools' repeat, cycle,
     * chain: the groupings' choices), that iterator and its type's tp_iternext, called without
     * the method-wrapper's generic call (about 110 instructions an emit) */
    PyObject *iter;
    iternextfunc iternext;
} NextChooser;

static int
NextChooser_traverse(NextChooser *self, visitproc visit, void *arg)
{
    Py_VISIT(self->next);
    Py_VISIT(self->iter);
    return 0;
}

static int
NextChooser_clear(NextChooser *self)
{
    Py_CLEAR(self->next);
    Py_CLEAR(self->iter);
    return 0;
}

static PyTypeObject *method_wrapper_type;  /* the type of iter(()).__next__ */

/* the iterator whose tp_iternext next calls, when next is the method-wrapper __next__ of an
 * iterator of a static (compiled) type, whose __next__ is that slot; else NULL (no error) */
static PyObject *
iterator_of(PyObject *next)
{
    if (method_wrapper_type == NULL || !Py_IS_TYPE(next, method_wrapper_type))
        return NULL;
    PyObject *name = PyObject_GetAttrString(next, "__name__");
    PyObject *it = name ? PyObject_GetAttrString(next, "__self__") : NULL;
    int is_next = name && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "__next__") == 0;
    Py_XDECREF(name);
    PyErr_Clear();
    if (it == NULL || !is_next || Py_TYPE(it)->tp_iternext == NULL || Py_TYPE(it)->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        Py_XDECREF(it);
        return NULL;
    }
    return it;
}

static void
NextChooser_dealloc(NextChooser *self)
{
    PyObject_GC_UnTrack(self);
    NextChooser_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
NextChooser_call(NextChooser *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "choose(values) takes one argument");
        return NULL;
    }
    if (self->iter != NULL) {
        PyObject *r = self->iternext(self->iter);
        if (r == NULL && !PyErr_Occurred())
            PyErr_SetNone(PyExc_StopIteration);  /* as next() of the method-wrapper */
        return r;
    }
    return PyObject_CallNoArgs(self->next);
}

static PyTypeObject NextChooser_Type;

/* a router's choose(values): a NextChooser with its iterator, and a MemoChooser, are called here
 * at once (the vectorcall's dispatch and argument checks, about 30 instructions an emit); a list's
 * ASCII key is chosen here, and this is compiled into each emit that calls it, so that a word's
 * choice makes no call at all (W1 on 2 workers: 113 instructions a word, 72 now, with the emit's) */
static inline Py_ALWAYS_INLINE PyObject *
choose_targets(PyObject *choose, PyObject *values)
{
    if (Py_IS_TYPE(choose, &NextChooser_Type) && ((NextChooser *)choose)->iter != NULL) {
        NextChooser *c = (NextChooser *)choose;
        PyObject *r = c->iternext(c->iter);
        if (r == NULL && !PyErr_Occurred())
            PyErr_SetNone(PyExc_StopIteration);
        return r;
    }
    if (Py_IS_TYPE(choose, &MemoChooser_Type)) {  /* a fields grouping's: its function at once */
        MemoChooser *c = (MemoChooser *)choose;
        if (PyList_CheckExact(values) && c->index < PyList_GET_SIZE(values)) {  /* an emit's list of a str */
            PyObject *v = PyList_GET_ITEM(values, c->index), *got;
            if (PyUnicode_CheckExact(v) && (got = memo_ascii_choice(c, v)) != NULL)
                return Py_NewRef(got);
        }
        return MemoChooser_call(c, &values, 1, NULL);
    }
    return PyObject_CallOneArg(choose, values);
}

static PyObject *
NextChooser_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *next;
    if (!PyArg_ParseTuple(args, "O:NextChooser", &next))
        return NULL;
    NextChooser *self = (NextChooser *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)NextChooser_call;
    self->next = Py_NewRef(next);
    self->iter = iterator_of(next);
    if (self->iter != NULL)
        self->iternext = Py_TYPE(self->iter)->tp_iternext;
    return (PyObject *)self;
}

static PyTypeObject NextChooser_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.NextChooser",
    .tp_basicsize = sizeof(NextChooser),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "NextChooser(next): choose(values) returns next().",
    .tp_vectorcall_offset = offsetof(NextChooser, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = NextChooser_new,
    .tp_traverse = (traverseproc)NextChooser_traverse,
    .tp_clear = (inquiry)NextChooser_clear,
    .tp_dealloc = (destructor)NextChooser_dealloc,
};

/* ---------------------------------------------------------------------------------------------
 * Sender(queue, task, tuple_type, plain, check): what a worker hands its executors for a task in
 * another worker (worker.batching.BatchingTransport.sender). queue is the peer's Outbox (below):
 * calling the sender with an item writes it there as bytes when it is plain, and a tracked emit
 * to a sender writes its tuple there without making it (send_edge). Or queue is a list (flat:
 * [task, item, task, item, ...]), and the sender appends task, then item, with no pair made for
 * them. No Python code runs between the two appends, so another thread never sees half.
 * An item that is not written as bytes, if it is a Tuple (exactly tuple_type) with a value whose
 * type is not in the frozenset plain, is first given to check(item), which raises for a value
 * that cannot be sent.
 */
static PyTypeObject Outbox_Type;
static int outbox_try(PyObject *ob, PyObject *task, PyObject *item, PyTypeObject *tt);
static int outbox_slow(PyObject *ob, PyObject *task, PyObject *item);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *queue, *task, *tuple_type, *plain, *check;
    PyObject *outbox;          /* queue when it is an Outbox (not held apart), else NULL */
    int str_plain, int_plain;  /* str and int are in plain: no set look-up for the commonest values */
} Sender;

#define SENDER_FIELDS(X) X(queue) X(task) X(tuple_type) X(plain) X(check)

static int
Sender_traverse(Sender *self, visitproc visit, void *arg)
{
#define V(f) Py_VISIT(self->f);
    SENDER_FIELDS(V)
#undef V
    return 0;
}

static int
Sender_clear(Sender *self)
{
#define C(f) Py_CLEAR(self->f);
    SENDER_FIELDS(C)
#undef C
    return 0;
}

static void
Sender_dealloc(Sender *self)
{
    PyObject_GC_UnTrack(self);
    Sender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Sender_call(Sender *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "send(item) takes one argument");
        return NULL;
    }
    PyObject *item = args[0];
    if (self->outbox != NULL) {
        int rc = outbox_try(self->outbox, self->task, item, (PyTypeObject *)self->tuple_type);
        if (rc < 0)
            return NULL;
        if (rc == 0)
            Py_RETURN_NONE;
    }
    if ((PyObject *)Py_TYPE(item) == self->tuple_type) {
        PyObject *values = ((TupleBase *)item)->values;
        PyObject *seq = PySequence_Fast(values, "a Tuple's values are not a sequence");
        if (seq == NULL)
            return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        PyObject **vs = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((self->str_plain && PyUnicode_CheckExact(vs[i])) || (self->int_plain && PyLong_CheckExact(vs[i])))
                continue;
            int plain = PySet_Contains(self->plain, (PyObject *)Py_TYPE(vs[i]));
            if (plain < 0) {
                Py_DECREF(seq);
                return NULL;
            }
            if (!plain) {
                PyObject *r = PyObject_CallOneArg(self->check, item);
                if (r == NULL) {
                    Py_DECREF(seq);
                    return NULL;
                }
                Py_DECREF(r);
                break;
            }
        }
        Py_DECREF(seq);
    }
    if (self->outbox != NULL) {
        if (outbox_slow(self->outbox, self->task, item) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    if (PyList_Append(self->queue, self->task) < 0)
        return NULL;
    if (PyList_Append(self->queue, item) < 0) {  /* no memory: take the task back, or the queue is askew */
        Py_ssize_t n = PyList_GET_SIZE(self->queue);
        PyList_SetSlice(self->queue, n - 1, n, NULL);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
Sender_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *queue, *task, *tuple_type, *plain, *check;
    if (!PyArg_ParseTuple(args, "OOO!O!O:Sender", &queue, &task, &PyType_Type, &tuple_type,
                          &PyFrozenSet_Type, &plain, &check))
        return NULL;
    if (!PyList_Check(queue) && !Py_IS_TYPE(queue, &Outbox_Type)) {
        PyErr_SetString(PyExc_TypeError, "Sender: queue must be a list or an Outbox");
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)tuple_type, &TupleBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "Sender: tuple_type must be a subclass of TupleBase");
        return NULL;
    }
    Sender *self = (Sender *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)Sender_call;
    self->queue = Py_NewRef(queue);
    self->task = Py_NewRef(task);
    self->tuple_type = Py_NewRef(tuple_type);
    self->plain = Py_NewRef(plain);
    self->check = Py_NewRef(check);
    self->outbox = Py_IS_TYPE(queue, &Outbox_Type) ? queue : NULL;
    self->str_plain = PySet_Contains(plain, (PyObject *)&PyUnicode_Type);
    self->int_plain = PySet_Contains(plain, (PyObject *)&PyLong_Type);
    if (self->str_plain < 0 || self->int_plain < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyTypeObject Sender_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.Sender",
    .tp_basicsize = sizeof(Sender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Sender(queue, task, tuple_type, plain, check): send(item) writes item for task into the "
              "Outbox queue, or appends task, then item, to the list queue; check(item) first for a Tuple "
              "not written as bytes with a value of a type not in plain.",
    .tp_vectorcall_offset = offsetof(Sender, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = Sender_new,
    .tp_traverse = (traverseproc)Sender_traverse,
    .tp_clear = (inquiry)Sender_clear,
    .tp_dealloc = (destructor)Sender_dealloc,
};

/* ---------------------------------------------------------------------------------------------
 * SpoutCollectorBase: the slots of a spout task's collector (spout_executor.SpoutCollector), and
 * its emit's two common cases: an untracked tuple, and a tracked one with acking on (a new root,
 * an edge per target, the pending entry, the acker's init). Every other case (a direct or
 * unknown stream, a wrong size, a msg_id with acking off) is _emit_general's, in Python.
 */
typedef struct {
    PyObject_HEAD
    PyObject *ex;          /* the SpoutExecutor: emits, in_flight, pending */
    PyObject *task;
    PyObject *routers;     /* stream -> Router */
    PyObject *deliver;     /* task -> callable(item) */
    PyObject *ackers;      /* list: acker index -> callable(message) */
    PyObject *rand;        /* () -> 64-bit edge id */
    PyObject *root;        /* () -> a new root id, below 2**64 (0 is taken as 1) */
    PyObject *now;         /* () -> the clock's time: the pending entry's start */
    PyObject *tuple_type;
    PyObject *pending;     /* the executor's pending map (ex.pending, never rebound), read without a look-up by name */
    RouterCache dflt;      /* the default stream's router */
    DeliverCache sent;     /* the callable of the task delivered to last */
    char acking;
} SpoutCollectorBase;

#define SPOUT_COLLECTOR_FIELDS(X) X(ex) X(task) X(routers) X(deliver) X(ackers) X(rand) X(root) X(now) X(tuple_type) X(pending)

static int
SpoutCollectorBase_traverse(SpoutCollectorBase *self, visitproc visit, void *arg)
{
#define V(f) Py_VISIT(self->f);
    SPOUT_COLLECTOR_FIELDS(V)
#undef V
    ROUTER_CACHE_VISIT(self->dflt);
    DELIVER_CACHE_VISIT(self->sent);
    return 0;
}

static int
SpoutCollectorBase_clear(SpoutCollectorBase *self)
{
#define C(f) Py_CLEAR(self->f);
    SPOUT_COLLECTOR_FIELDS(C)
#undef C
    ROUTER_CACHE_CLEAR(self->dflt);
    DELIVER_CACHE_CLEAR(self->sent);
    return 0;
}

static void
SpoutCollectorBase_dealloc(SpoutCollectorBase *self)
{
    PyObject_GC_UnTrack(self);
    SpoutCollectorBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *str_emit_general, *str_emits, *str_newest;
static SlotCache slot_newest;

/* deliver a tracked tuple to every target; the xor of their edge ids in *xor */
static int
spout_send_tracked(SpoutCollectorBase *self, RouterBase *r, PyObject *targets, PyObject *values,
                   PyObject *root, unsigned long long *xor)
{
    PyTypeObject *tt = (PyTypeObject *)self->tuple_type;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(targets); i++) {
        PyObject *task = PyList_GET_ITEM(targets, i);
        Py_INCREF(task);
        int rc = send_edge(&self->sent, self->deliver, task, tt, values, r->src, root, self->rand, xor);
        Py_DECREF(task);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* what SpoutCollector._send does after the counters for a tracked tuple, targets delivered */
static int
spout_track(SpoutCollectorBase *self, RouterBase *r, PyObject *targets, PyObject *values, PyObject *msg_id)
{
    unsigned long long rootv, xor = 0;
    PyObject *root = draw_id(self->root, &rootv, "root");
    if (root == NULL)
        return -1;
    int rc = -1;
    PyObject *pending = NULL, *newest = NULL, *started = NULL, *entry = NULL, *xo = NULL, *init = NULL;
    if (rootv == 0) {  /* 0 means untracked: drawn as 1, as in Python (self._root() or 1) */
        Py_SETREF(root, Py_NewRef(ONE));
        rootv = 1;
    }
    if (spout_send_tracked(self, r, targets, values, root, &xor) < 0)
        goto done;
    /* a fresh random 64-bit root is in no bucket: store it without RotatingMap.put's scan */
    pending = self->pending ? Py_NewRef(self->pending) : PyObject_GetAttr(self->ex, str_pending);
    newest = pending ? slot_get(pending, str_newest, &slot_newest) : NULL;
    started = newest ? call_quick(self->now, NULL) : NULL;  /* time.monotonic, called at once */
    entry = started ? PyTuple_Pack(4, msg_id, self->task, r->stream, started) : NULL;
    if (entry == NULL || PyDict_SetItem(newest, root, entry) < 0 ||
            count(self->ex, &SpoutExecutorBase_Type, &seen_spout_executor, offsetof(SpoutExecutorBase, in_flight), str_in_flight, 1) < 0)
        goto done;
    if (!PyList_Check(self->ackers) || PyList_GET_SIZE(self->ackers) == 0) {
        PyErr_SetString(PyExc_RuntimeError, "a tracked emit with no acker");
        goto done;
    }
    xo = PyLong_FromUnsignedLongLong(xor);
    init = xo ? PyTuple_Pack(4, ZERO, root, xo, self->task) : NULL;  /* (INIT, root, xor, task) */
    if (init == NULL)
        goto done;
    PyObject *acker = PyList_GET_ITEM(self->ackers, (Py_ssize_t)(rootv % (unsigned long long)PyList_GET_SIZE(self->ackers)));
    Py_INCREF(acker);
    PyObject *res = PyObject_CallOneArg(acker, init);
    Py_DECREF(acker);
    if (res == NULL)
        goto done;
    Py_DECREF(res);
    rc = 0;
done:
    Py_XDECREF(init);
    Py_XDECREF(xo);
    Py_XDECREF(entry);
    Py_XDECREF(started);
    Py_XDECREF(newest);
    Py_XDECREF(pending);
    Py_DECREF(root);
    return rc;
}

static PyObject *
SpoutCollectorBase_emit(SpoutCollectorBase *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"values", "msg_id", "stream"};
    PyObject *given[3] = {NULL, Py_None, DEFAULT_STREAM};
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError, "emit(values, msg_id=None, stream='default') takes at most 3 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int j = 0;
        while (j < 3 && PyUnicode_CompareWithASCIIString(name, names[j]) != 0)
            j++;
        if (j == 3 || j < nargs) {
            PyErr_Format(PyExc_TypeError, j == 3 ? "emit() got an unexpected keyword argument %R"
                                                 : "emit() got multiple values for argument %R", name);
            return NULL;
        }
        given[j] = args[nargs + k];
    }
    PyObject *values = given[0], *msg_id = given[1], *stream = given[2];
    if (values == NULL) {
        PyErr_SetString(PyExc_TypeError, "emit() missing required argument 'values'");
        return NULL;
    }
    int tracked = msg_id != Py_None;
    PyObject *ro = self->routers && PyDict_Check(self->routers) ? router_of(&self->dflt, self->routers, stream) : NULL;
    if (ro == NULL && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear();  /* an unhashable stream: Python's error names it */
    }
    RouterBase *r = (RouterBase *)ro;
    if (ro == NULL || !is_a(ro, &RouterBase_Type, &seen_router) || r->direct != Py_False || r->nfields == NULL ||
            r->choose == NULL || self->ex == NULL ||
            (tracked && !self->acking) ||  /* Storm acks inside emit when acking is off: Python's path */
            !(PyList_Check(values) || PyTuple_Check(values)))  /* not a list of values: Python's error */
        goto general;
    Py_ssize_t n = PyObject_Size(values);
    if (n < 0) {
        PyErr_Clear();
        goto general;
    }
    Py_ssize_t want = PyLong_AsSsize_t(r->nfields);
    if (want == -1 && PyErr_Occurred())
        return NULL;
    if (n != want)
        goto general;
    Py_INCREF(ro);  /* the router and values are held while user-visible calls run */
    Py_INCREF(values);
    PyObject *targets = choose_targets(r->choose, values);
    if (targets == NULL)
        goto fail;
    if (!PyList_Check(targets)) {
        PyErr_Format(PyExc_TypeError, "a grouping chose %R, not a list of task ids", targets);
        goto fail;
    }
    Py_ssize_t nt = PyList_GET_SIZE(targets);
    r->emitted++;
    r->transferred += nt;
    if (count(self->ex, &SpoutExecutorBase_Type, &seen_spout_executor, offsetof(SpoutExecutorBase, emits), str_emits, 1) < 0)
        goto fail;
    if (tracked) {
        if (spout_track(self, r, targets, values, msg_id) < 0)
            goto fail;
    } else if (nt) {
        PyObject *t = tuple_make_bits((PyTypeObject *)self->tuple_type, values, r->src, ZERO, 0, 0);
        if (t == NULL)
            goto fail;
        int rc = deliver_to_all(&self->sent, self->deliver, targets, t);
        Py_DECREF(t);
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(values);
    Py_DECREF(ro);
    return targets;
fail:
    Py_XDECREF(targets);
    Py_DECREF(values);
    Py_DECREF(ro);
    return NULL;
general:
    return PyObject_CallMethodObjArgs((PyObject *)self, str_emit_general, values, msg_id, stream, NULL);
}

static PyMethodDef SpoutCollectorBase_methods[] = {
    {"emit", (PyCFunction)(void (*)(void))SpoutCollectorBase_emit, METH_FASTCALL | METH_KEYWORDS,
     "Emit ``values`` on ``stream``, tracked when ``msg_id`` is given (SpoutOutputCollector.emit)."},
    {NULL}
};

static PyMemberDef SpoutCollectorBase_members[] = {
    {"_ex", T_OBJECT, offsetof(SpoutCollectorBase, ex), 0, NULL},
    {"_task", T_OBJECT, offsetof(SpoutCollectorBase, task), 0, NULL},
    {"routers", T_OBJECT, offsetof(SpoutCollectorBase, routers), 0, "stream -> Router."},
    {"_deliver", T_OBJECT, offsetof(SpoutCollectorBase, deliver), 0, NULL},
    {"_ackers", T_OBJECT, offsetof(SpoutCollectorBase, ackers), 0, NULL},
    {"_rand", T_OBJECT, offsetof(SpoutCollectorBase, rand), 0, NULL},
    {"_root", T_OBJECT, offsetof(SpoutCollectorBase, root), 0, NULL},
    {"_now", T_OBJECT, offsetof(SpoutCollectorBase, now), 0, NULL},
    {"_tuple_type", T_OBJECT, offsetof(SpoutCollectorBase, tuple_type), 0, NULL},
    {"_pending", T_OBJECT, offsetof(SpoutCollectorBase, pending), 0, NULL},
    {"_acking", T_BOOL, offsetof(SpoutCollectorBase, acking), 0, NULL},
    {NULL}
};

static PyTypeObject SpoutCollectorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.SpoutCollectorBase",
    .tp_doc = "The slots and emit of squall.engine.spout_executor.SpoutCollector.",
    .tp_basicsize = sizeof(SpoutCollectorBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)SpoutCollectorBase_traverse,
    .tp_clear = (inquiry)SpoutCollectorBase_clear,
    .tp_dealloc = (destructor)SpoutCollectorBase_dealloc,
    .tp_members = SpoutCollectorBase_members,
    .tp_methods = SpoutCollectorBase_methods,
};

/* ---------------------------------------------------------------------------------------------
 * BoltCollectorBase: the slots of a bolt task's collector (bolt_executor.BoltCollector), and its
 * ack's common case: on the loop's thread, an input of one tree (an int root), nothing held, and
 * no sibling of its tree next in the inbox: the ack goes to the acker at once. Every other case
 * (another thread, several roots, acks held for coalescing) is _ack_general's, in Python.
 */
typedef struct {
    PyObject_HEAD
    PyObject *ex;            /* the BoltExecutor: its held acks */
    PyObject *inbox;         /* the task's inbox (a deque): is a sibling next? */
    PyObject *ackers;        /* list: acker index -> callable(message) */
    PyObject *stats;         /* TaskStats: acked */
    PyObject *samples;       /* dict of open samples: non-empty -> close_sample */
    PyObject *close_sample;
    PyObject *now;
    PyObject *loop_ident;    /* the loop thread's ident, an int (-1 until the loop starts) */
    PyObject *acks;          /* the executor's dict of held acks (ex.acks), read without a look-up by name */
} BoltCollectorBase;

#define BOLT_COLLECTOR_FIELDS(X) X(ex) X(inbox) X(ackers) X(stats) X(samples) X(close_sample) X(now) X(loop_ident) X(acks)

static int
BoltCollectorBase_traverse(BoltCollectorBase *self, visitproc visit, void *arg)
{
#define V(f) Py_VISIT(self->f);
    BOLT_COLLECTOR_FIELDS(V)
#undef V
    return 0;
}

static int
BoltCollectorBase_clear(BoltCollectorBase *self)
{
#define C(f) Py_CLEAR(self->f);
    BOLT_COLLECTOR_FIELDS(C)
#undef C
    return 0;
}

static void
BoltCollectorBase_dealloc(BoltCollectorBase *self)
{
    PyObject_GC_UnTrack(self);
    BoltCollectorBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *str_ack_general, *ACK_KIND;


static PyObject *
BoltCollectorBase_ack(BoltCollectorBase *self, PyObject *tup)
{
    if (!is_a(tup, &TupleBase_Type, &seen_tuple) || self->ex == NULL || self->inbox == NULL ||
            self->stats == NULL || self->loop_ident == NULL || !PyLong_Check(self->loop_ident) ||
            self->ackers == NULL || !PyList_Check(self->ackers) || PyList_GET_SIZE(self->ackers) == 0)
        goto general;
    TupleBase *t = (TupleBase *)tup;
    PyObject *root = t->root;
    if (!PyLong_CheckExact(root) || PyLong_AsUnsignedLongMask(self->loop_ident) != PyThread_get_thread_ident())
        goto general;
    int tracked = PyObject_IsTrue(root);
    if (tracked < 0)
        return NULL;
    if (!tracked)
        goto general;
    int held;
    if (self->acks != NULL && PyDict_CheckExact(self->acks)) {
        held = PyDict_GET_SIZE(self->acks) != 0;
    } else {
        PyObject *acks = PyObject_GetAttr(self->ex, str_acks);
        if (acks == NULL)
            return NULL;
        held = PyObject_IsTrue(acks);
        Py_DECREF(acks);
    }
    if (held < 0)
        return NULL;
    if (held)
        goto general;
    int sibling = sibling_next(self->inbox, root);
    if (sibling < 0)
        return NULL;
    if (sibling)
        goto general;
    if (send_ack_bits(self->ackers, ACK_KIND, root, t->val ^ t->oav) < 0)  /* (ACK, root, val ^ oav, -1) */
        return NULL;
    if (count(self->stats, &TaskStatsBase_Type, &seen_task_stats, offsetof(TaskStatsBase, acked), str_acked, 1) < 0)
        return NULL;
    int sampling = self->samples ? PyObject_IsTrue(self->samples) : 0;
    if (sampling < 0)
        return NULL;
    if (sampling) {
        PyObject *id = PyLong_FromVoidPtr(tup), *now = PyObject_CallNoArgs(self->now);
        PyObject *res = id && now ? PyObject_CallFunctionObjArgs(self->close_sample, id, Py_True, now, NULL) : NULL;
        Py_XDECREF(id);
        Py_XDECREF(now);
        if (res == NULL)
            return NULL;
        Py_DECREF(res);
    }
    Py_RETURN_NONE;
general:
    return PyObject_CallMethodOneArg((PyObject *)self, str_ack_general, tup);
}

static PyMethodDef BoltCollectorBase_methods[] = {
    {"ack", (PyCFunction)BoltCollectorBase_ack, METH_O, "Ack ``tup`` (OutputCollector.ack)."},
    {NULL}
};

static PyMemberDef BoltCollectorBase_members[] = {
#define M(f) {"_" #f, T_OBJECT, offsetof(BoltCollectorBase, f), 0, NULL},
    BOLT_COLLECTOR_FIELDS(M)
#undef M
    {NULL}
};

static PyTypeObject BoltCollectorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.BoltCollectorBase",
    .tp_doc = "The slots and ack of squall.engine.bolt_executor.BoltCollector.",
    .tp_basicsize = sizeof(BoltCollectorBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)BoltCollectorBase_traverse,
    .tp_clear = (inquiry)BoltCollectorBase_clear,
    .tp_dealloc = (destructor)BoltCollectorBase_dealloc,
    .tp_members = BoltCollectorBase_members,
    .tp_methods = BoltCollectorBase_methods,
};

/* ---------------------------------------------------------------------------------------------
 * batch_items(out, targets, values, src, roots, vals, tuple_type): a decoded batch's run of
 * Tuples, appended to the list out flat, target then tuple_type(values[i], src, roots[i], vals[i])
 * (roots None: untracked tuples), as a sender queues them: no pair is made per item, since it
 * lived until the delivery and was freed cold there. Made with tuple_make: a Tuple called from
 * Python parses its arguments by keyword, which was most of a received item's cost.
 */
static PyObject *
batch_items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "batch_items(out, targets, values, src, roots, vals, tuple_type)");
        return NULL;
    }
    PyObject *out = args[0], *src = args[3], *tt = args[6];
    if (!PyList_Check(out) || !PyType_Check(tt) || !PyType_IsSubtype((PyTypeObject *)tt, &TupleBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "batch_items: out must be a list and tuple_type a TupleBase type");
        return NULL;
    }
    int tracked = args[4] != Py_None;
    PyObject *targets = PySequence_Fast(args[1], "a batch's targets are not a sequence");
    PyObject *values = targets ? PySequence_Fast(args[2], "a batch's values are not a sequence") : NULL;
    PyObject *roots = values && tracked ? PySequence_Fast(args[4], "a batch's roots are not a sequence") : NULL;
    PyObject *vals = roots ? PySequence_Fast(args[5], "a batch's ack values are not a sequence") : NULL;
    PyObject *result = NULL;
    if (values == NULL || (tracked && vals == NULL))
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(targets);
    if (PySequence_Fast_GET_SIZE(values) != n ||
            (tracked && (PySequence_Fast_GET_SIZE(roots) != n || PySequence_Fast_GET_SIZE(vals) != n))) {
        PyErr_SetString(PyExc_ValueError, "a batch's run has columns of different lengths");
        goto done;
    }
    PyObject *root = NULL;  /* borrowed from roots */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (tracked && PySequence_Fast_GET_ITEM(roots, i) != Py_None) {
            root = PySequence_Fast_GET_ITEM(roots, i);
        } else if (tracked && root == NULL) {
            PyErr_SetString(PyExc_ValueError, "a batch's run begins with the previous tuple's root");
            goto done;
        }  /* None: the previous tuple's root, the same object (serialize.SAME_ROOT) */
        PyObject *t = tuple_make((PyTypeObject *)tt, PySequence_Fast_GET_ITEM(values, i), src,
                                 tracked ? root : ZERO,
                                 tracked ? PySequence_Fast_GET_ITEM(vals, i) : ZERO, ZERO);
        if (t == NULL)
            goto done;
        int rc = PyList_Append(out, PySequence_Fast_GET_ITEM(targets, i));
        if (rc == 0 && (rc = PyList_Append(out, t)) < 0) {  /* no memory: take the target back */
            Py_ssize_t len = PyList_GET_SIZE(out);
            PyList_SetSlice(out, len - 1, len, NULL);
        }
        Py_DECREF(t);
        if (rc < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(targets);
    Py_XDECREF(values);
    Py_XDECREF(roots);
    Py_XDECREF(vals);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * group_items(items, tuple_type): the columns of a batch to send (engine.serialize.Serializer.
 * encode_batch; items flat: [task, item, task, item, ...]):
 * [runs, sources, ack_targets, acks, reply_targets, replies], each run
 * [src.task, src.stream, targets, values, roots, vals] for consecutive Tuples of one source (its
 * roots and vals None when none is tracked), acker messages and spout replies flat; or None for
 * an item that is none of these, whose error the Python path words.
 */
static PyObject *str_task, *str_stream;

/* list.append(an int of v) */
static int
append_u64(PyObject *list, unsigned long long v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (o == NULL)
        return -1;
    int rc = PyList_Append(list, o);
    Py_DECREF(o);
    return rc;
}

static PyObject *
group_items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "group_items(items, tuple_type)");
        return NULL;
    }
    PyTypeObject *tt = (PyTypeObject *)args[1];
    /* a copy of the items, which holds each of them: a source's task or stream read below, or a
       root's truth, may run Python code that changes the list (a list walked in place was read
       past its end once a property cleared it: a crash) */
    PyObject *items = PySequence_Tuple(args[0]);
    if (items == NULL)
        return NULL;
    PyObject *runs = PyList_New(0), *sources = PyList_New(0), *ack_targets = PyList_New(0),
             *acks = PyList_New(0), *reply_targets = PyList_New(0), *replies = PyList_New(0);
    PyObject *result = NULL, *cur = NULL;  /* cur: the current run's source (borrowed from its item) */
    PyObject *targets = NULL, *values = NULL, *roots = NULL, *vals = NULL;  /* the current run's, borrowed */
    PyObject *prev_root = NULL;  /* the run's previous Tuple's root, borrowed from it */
    if (!runs || !sources || !ack_targets || !acks || !reply_targets || !replies)
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    if (n % 2)
        goto unknown;
    for (Py_ssize_t i = 0; i < n; i += 2) {
        PyObject *target = PyTuple_GET_ITEM(items, i), *item = PyTuple_GET_ITEM(items, i + 1);
        if (Py_TYPE(item) == tt) {
            TupleBase *t = (TupleBase *)item;
            if (t->src != cur) {
                PyObject *task = PyObject_GetAttr(t->src, str_task);
                PyObject *stream = task ? PyObject_GetAttr(t->src, str_stream) : NULL;
                targets = stream ? PyList_New(0) : NULL;
                values = targets ? PyList_New(0) : NULL;
                roots = values ? PyList_New(0) : NULL;
                vals = roots ? PyList_New(0) : NULL;
                PyObject *run = vals ? PyList_New(6) : NULL;
                if (run == NULL) {
                    Py_XDECREF(task);
                    Py_XDECREF(stream);
                    Py_XDECREF(targets);
                    Py_XDECREF(values);
                    Py_XDECREF(roots);
                    Py_XDECREF(vals);
                    goto done;
                }
                PyList_SET_ITEM(run, 0, task);  /* the run takes every reference */
                PyList_SET_ITEM(run, 1, stream);
                PyList_SET_ITEM(run, 2, targets);
                PyList_SET_ITEM(run, 3, values);
                PyList_SET_ITEM(run, 4, roots);
                PyList_SET_ITEM(run, 5, vals);
                int rc = PyList_Append(runs, run);
                Py_DECREF(run);
                if (rc < 0 || PyList_Append(sources, t->src) < 0)
                    goto done;
                cur = t->src;
                prev_root = NULL;
            }
            /* the previous Tuple's int root again: None (serialize.SAME_ROOT) */
            PyObject *root = PyLong_CheckExact(t->root) && t->root == prev_root ? Py_None : t->root;
            prev_root = t->root;
            if (PyList_Append(targets, target) < 0 || PyList_Append(values, t->values) < 0 ||
                    PyList_Append(roots, root) < 0 || append_u64(vals, t->val) < 0)
                goto done;
        } else if (PyTuple_CheckExact(item) && (PyTuple_GET_SIZE(item) == 4 || PyTuple_GET_SIZE(item) == 3)) {
            int ack = PyTuple_GET_SIZE(item) == 4;
            if (PyList_Append(ack ? ack_targets : reply_targets, target) < 0)
                goto done;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(item); k++)
                if (PyList_Append(ack ? acks : replies, PyTuple_GET_ITEM(item, k)) < 0)
                    goto done;
        } else {
            goto unknown;
        }
    }
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(runs); r++) {  /* an untracked run: no ack columns */
        PyObject *run = PyList_GET_ITEM(runs, r), *rs = PyList_GET_ITEM(run, 4);
        int tracked = 0;
        for (Py_ssize_t k = 0; !tracked && k < PyList_GET_SIZE(rs); k++) {
            tracked = PyObject_IsTrue(PyList_GET_ITEM(rs, k));
            if (tracked < 0)
                goto done;
        }
        if (!tracked) {
            PyList_SetItem(run, 4, Py_NewRef(Py_None));
            PyList_SetItem(run, 5, Py_NewRef(Py_None));
        }
    }
    result = PyList_New(6);
    if (result != NULL) {
        PyObject *parts[] = {runs, sources, ack_targets, acks, reply_targets, replies};
        for (int k = 0; k < 6; k++)
            PyList_SET_ITEM(result, k, Py_NewRef(parts[k]));
    }
    goto done;
unknown:
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(items);
    Py_XDECREF(runs);
    Py_XDECREF(sources);
    Py_XDECREF(ack_targets);
    Py_XDECREF(acks);
    Py_XDECREF(reply_targets);
    Py_XDECREF(replies);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * pack_batch(items, tuple_type): a batch's bytes made straight from its items (flat, as
 * group_items takes them; engine.serialize.Serializer.encode_batch), without group_items' lists of columns and msgpack's walk over them.
 * The bytes are those msgpack writes for the batch, byte for byte (the tests compare them):
 *     [1, runs, ack_targets, acks, reply_targets, replies]   (serialize.py's module note)
 * It knows plain values only: None, bool, ints of 64 bits, float, str, bytes, and a Tuple's list
 * of them. For anything else (a value that is a container, registered or pickled, an int beyond
 * 64 bits, a Tuple of several trees, an item of another kind) it returns None, and the serializer
 * packs the batch with msgpack, which encodes it or words the error. Under valgrind, on W1's
 * word tuples: 908 instructions an item, against 1,728 with group_items and msgpack. Decoding has
 * no such twin: one written the same way made the same objects as msgpack and batch_items do,
 * and that is most of the cost (2,294 instructions an item against 2,200).
 */
typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Writer;

static int
w_reserve(Writer *w, Py_ssize_t extra)
{
    if (w->len + extra <= w->cap)
        return 0;
    Py_ssize_t cap = w->cap * 2 > w->len + extra ? w->cap * 2 : w->len + extra;
    char *buf = PyMem_Realloc(w->buf, (size_t)cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->buf = buf;
    w->cap = cap;
    return 0;
}

static inline void
w_be(Writer *w, unsigned char tag, uint64_t v, int bytes)  /* tag, then v in `bytes` bytes, big-endian */
{
    /* stored whole, byte-swapped, rather than a byte at a time (an 8-byte root or edge value in
     * every crossing word's run) */
    char *p = w->buf + w->len;
    *p++ = (char)tag;
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    switch (bytes) {
    case 1: *p = (char)v; break;
    case 2: { uint16_t b = __builtin_bswap16((uint16_t)v); memcpy(p, &b, 2); break; }
    case 4: { uint32_t b = __builtin_bswap32((uint32_t)v); memcpy(p, &b, 4); break; }
    default: { uint64_t b = __builtin_bswap64(v); memcpy(p, &b, 8); break; }
    }
#else
    for (int k = bytes - 1; k >= 0; k--)
        *p++ = (char)(v >> (8 * k));
#endif
    w->len += 1 + bytes;
}

/* a str, bin or array header of n (fix: the fix-size tag, or 0 for none); as w_plain, 1 when n is
 * too long for msgpack */
static int
w_header(Writer *w, Py_ssize_t n, unsigned char fix, Py_ssize_t fix_max, unsigned char t8,
         unsigned char t16, unsigned char t32)
{
    if (w_reserve(w, 5) < 0)
        return -1;
    if (fix && n < fix_max)
        w->buf[w->len++] = (char)(fix | n);
    else if (t8 && n < 256)
        w_be(w, t8, (uint64_t)n, 1);
    else if (n < 65536)
        w_be(w, t16, (uint64_t)n, 2);
    else if ((uint64_t)n <= 0xffffffffULL)
        w_be(w, t32, (uint64_t)n, 4);
    else
        return 1;
    return 0;
}

#define W_ARRAY(w, n) w_header((w), (n), 0x90, 16, 0, 0xdc, 0xdd)

/* 0: packed; 1: not a plain value (the caller gives up); -1: an error is set */
static int
w_plain(Writer *w, PyObject *o)
{
    if (PyUnicode_CheckExact(o) && PyUnicode_IS_COMPACT_ASCII(o) && PyUnicode_GET_LENGTH(o) < 32) {
        /* a short ASCII str (a word): a one-byte header, then the object's own bytes */
        Py_ssize_t n = PyUnicode_GET_LENGTH(o);
        if (w_reserve(w, 1 + n) < 0)
            return -1;
        w->buf[w->len++] = (char)(0xa0 | n);
        memcpy(w->buf + w->len, PyUnicode_DATA(o), (size_t)n);
        w->len += n;
        return 0;
    }
    if (w_reserve(w, 9) < 0)
        return -1;
    if (o == Py_None) {
        w->buf[w->len++] = (char)0xc0;
    } else if (o == Py_True || o == Py_False) {
        w->buf[w->len++] = (char)(o == Py_True ? 0xc3 : 0xc2);
    } else if (PyLong_CheckExact(o)) {
        /* 0 .. 2**64 - 1 (every id and task) read from its digits: the shortest unsigned form, as
           msgpack's packer writes it; a negative int takes the signed path */
        unsigned long long u;
        if (u64_of(o, &u) == 0) {
            if (u < 128)
                w->buf[w->len++] = (char)u;
            else if (u < 256)
                w_be(w, 0xcc, u, 1);
            else if (u < 65536)
                w_be(w, 0xcd, u, 2);
            else if (u <= 0xffffffffULL)
                w_be(w, 0xce, u, 4);
            else
                w_be(w, 0xcf, u, 8);
            return 0;
        }
        /* negative, or 2**64 and more */
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow != 0) {  /* beyond 64 bits: the Python path writes msgpack's ext type */
            return 1;
        } else if (v == -1 && PyErr_Occurred()) {
            return -1;
        } else if (v >= -32) {
            w->buf[w->len++] = (char)(unsigned char)(0xe0 | (v + 32));
        } else if (v >= -128) {
            w_be(w, 0xd0, (uint64_t)v, 1);
        } else if (v >= -32768) {
            w_be(w, 0xd1, (uint64_t)v, 2);
        } else if (v >= -2147483648LL) {
            w_be(w, 0xd2, (uint64_t)v, 4);
        } else {
            w_be(w, 0xd3, (uint64_t)v, 8);
        }
    } else if (PyFloat_CheckExact(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        uint64_t bits;
        memcpy(&bits, &d, 8);
        w_be(w, 0xcb, bits, 8);
    } else if (PyUnicode_CheckExact(o)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(o, &n);
        if (s == NULL) {  /* a lone surrogate: msgpack raises, in the Python path's words */
            PyErr_Clear();
            return 1;
        }
        int rc = w_header(w, n, 0xa0, 32, 0xd9, 0xda, 0xdb);
        if (rc != 0 || w_reserve(w, n) < 0)
            return rc != 0 ? rc : -1;
        memcpy(w->buf + w->len, s, (size_t)n);
        w->len += n;
    } else if (PyBytes_CheckExact(o)) {
        Py_ssize_t n = PyBytes_GET_SIZE(o);
        int rc = w_header(w, n, 0, 0, 0xc4, 0xc5, 0xc6);
        if (rc != 0 || w_reserve(w, n) < 0)
            return rc != 0 ? rc : -1;
        memcpy(w->buf + w->len, PyBytes_AS_STRING(o), (size_t)n);
        w->len += n;
    } else {
        return 1;
    }
    return 0;
}

/* the i-th (target, item) of pack_batch's flat list */
#define TARGET(i) PyList_GET_ITEM(items, 2 * (i))
#define ITEM(i) PyList_GET_ITEM(items, 2 * (i) + 1)
#define W(call) do { int rc_ = (call); if (rc_ != 0) { result = rc_ < 0 ? NULL : Py_NewRef(Py_None); goto done; } } while (0)

/* pack_batch's walk of its items (no Python code runs in it): each run's first item into starts
 * (nruns + 1 of them, the last n), the acker messages and replies counted; 1 when an item is none
 * of the three kinds */
static int
pack_runs(PyObject *items, PyTypeObject *tt, Py_ssize_t *starts, Py_ssize_t *nruns, Py_ssize_t *nacks,
          Py_ssize_t *nreplies)
{
    Py_ssize_t n = PyList_GET_SIZE(items) / 2;
    PyObject *cur = NULL;
    *nruns = *nacks = *nreplies = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = ITEM(i);
        if (Py_TYPE(item) == tt) {
            if (((TupleBase *)item)->src != cur) {
                cur = ((TupleBase *)item)->src;
                starts[(*nruns)++] = i;
            }
        } else if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 4) {
            (*nacks)++;
        } else if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 3) {
            (*nreplies)++;
        } else {
            return 1;
        }
    }
    starts[*nruns] = n;
    return 0;
}

static PyObject *
pack_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyType_Check(args[1]) ||
            !PyType_IsSubtype((PyTypeObject *)args[1], &TupleBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "pack_batch(items: list, tuple_type: a TupleBase type)");
        return NULL;
    }
    PyObject *items = args[0];
    PyTypeObject *tt = (PyTypeObject *)args[1];
    if (PyList_GET_SIZE(items) % 2)  /* not task, item pairs: the Python path words the error */
        return Py_NewRef(Py_None);
    Py_ssize_t n = PyList_GET_SIZE(items) / 2, nruns = 0, nacks = 0, nreplies = 0;
    Py_ssize_t *starts = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));  /* each run's first item */
    Writer w = {PyMem_Malloc(8192), 0, 8192};
    PyObject *result = NULL, **heads = NULL;  /* heads: each run's source, task and stream (held) */
    if (starts == NULL || w.buf == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* first: the runs (consecutive Tuples of one source; acker messages and replies between the
       Tuples of a run do not end it), and whether every item is one of the three */
    if (pack_runs(items, tt, starts, &nruns, &nacks, &nreplies))
        goto plain_not;
    /* then each run's source's task and stream (held, with the source): reading them may run
       Python code (a property), which may change the items or free them; so the items are walked
       again after, and the batch is left to msgpack's path unless the runs' sources are the same
       objects. Nothing below runs Python code (written in place, the list was read past its end
       once such a property cleared it: a crash) */
    heads = PyMem_Calloc((size_t)(3 * nruns + 1), sizeof(PyObject *));
    if (heads == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < nruns; r++) {
        PyObject *src = heads[3 * r] = Py_NewRef(((TupleBase *)ITEM(starts[r]))->src);
        if ((heads[3 * r + 1] = PyObject_GetAttr(src, str_task)) == NULL ||
                (heads[3 * r + 2] = PyObject_GetAttr(src, str_stream)) == NULL)
            goto done;
        if (PyList_GET_SIZE(items) != 2 * n)  /* changed: starts has no room for another walk */
            goto plain_not;
    }
    Py_ssize_t nheads = nruns;
    if (pack_runs(items, tt, starts, &nruns, &nacks, &nreplies) || nruns != nheads)
        goto plain_not;
    for (Py_ssize_t r = 0; r < nruns; r++)
        if (((TupleBase *)ITEM(starts[r]))->src != heads[3 * r])
            goto plain_not;
    w.buf[w.len++] = (char)0x96;
    w.buf[w.len++] = (char)0x02;  /* serialize.FORMAT */
    W(W_ARRAY(&w, nruns));
    for (Py_ssize_t r = 0; r < nruns; r++) {
        Py_ssize_t count = 0;
        int tracked = 0;
        for (Py_ssize_t i = starts[r]; i < starts[r + 1]; i++) {
            PyObject *item = ITEM(i);
            if (Py_TYPE(item) != tt)
                continue;
            PyObject *root = ((TupleBase *)item)->root;
            if (!PyLong_CheckExact(root))  /* several trees: a dict */
                goto plain_not;
            count++;
#if PY_VERSION_HEX < 0x030C0000
            tracked |= Py_SIZE(root) != 0;  /* an exact int's truth, without a call */
#else
            tracked |= PyObject_IsTrue(root);  /* an int's: never fails */
#endif
        }
        W(W_ARRAY(&w, 6));
        W(w_plain(&w, heads[3 * r + 1]));
        W(w_plain(&w, heads[3 * r + 2]));
        for (int column = 0; column < 4; column++) {  /* targets, values, roots, vals */
            if (column >= 2 && !tracked) {
                W(w_plain(&w, Py_None));
                continue;
            }
            W(W_ARRAY(&w, count));
            PyObject *prev_root = NULL;
            for (Py_ssize_t i = starts[r]; i < starts[r + 1]; i++) {
                PyObject *item = ITEM(i);
                if (Py_TYPE(item) != tt)
                    continue;
                TupleBase *t = (TupleBase *)item;
                if (column == 0) {
                    W(w_plain(&w, TARGET(i)));
                } else if (column == 2) {  /* the previous Tuple's root again: nil (serialize.SAME_ROOT) */
                    W(w_plain(&w, t->root == prev_root ? Py_None : t->root));
                    prev_root = t->root;
                } else if (column == 3) {  /* the edge value, 64 bits in the Tuple */
                    PyObject *v = PyLong_FromUnsignedLongLong(t->val);
                    if (v == NULL)
                        goto done;
                    int wrote = w_plain(&w, v);
                    Py_DECREF(v);
                    W(wrote);
                } else {
                    if (!PyList_CheckExact(t->values))
                        goto plain_not;
                    Py_ssize_t k = PyList_GET_SIZE(t->values);
                    if (k < 16 && w_reserve(&w, 1) == 0)  /* a fixarray: one byte */
                        w.buf[w.len++] = (char)(0x90 | k);
                    else
                        W(W_ARRAY(&w, k));
                    for (Py_ssize_t j = 0; j < k; j++)  /* the list may not change under us: no Python runs here */
                        W(w_plain(&w, PyList_GET_ITEM(t->values, j)));
                }
            }
        }
    }
    for (int kind = 0; kind < 2; kind++) {  /* acker messages, then spout replies */
        Py_ssize_t size = kind == 0 ? 4 : 3, count = kind == 0 ? nacks : nreplies;
        for (int column = 0; column < 2; column++) {  /* their targets, then their fields */
            W(W_ARRAY(&w, column == 0 ? count : count * size));
            for (Py_ssize_t i = 0; i < n && count; i++) {
                PyObject *item = ITEM(i);
                if (Py_TYPE(item) == tt || PyTuple_GET_SIZE(item) != size)
                    continue;
                if (column == 0) {
                    W(w_plain(&w, TARGET(i)));
                } else {
                    for (Py_ssize_t k = 0; k < size; k++)
                        W(w_plain(&w, PyTuple_GET_ITEM(item, k)));
                }
            }
        }
    }
    result = PyBytes_FromStringAndSize(w.buf, w.len);
    goto done;
plain_not:
    result = Py_NewRef(Py_None);
done:
    if (heads != NULL) {
        for (Py_ssize_t k = 0; heads[k] != NULL; k++)  /* filled in order, up to the first NULL */
            Py_DECREF(heads[k]);
        PyMem_Free(heads);
    }
    PyMem_Free(starts);
    PyMem_Free(w.buf);
    return result;
}
#undef W
#undef TARGET
#undef ITEM

/* ---------------------------------------------------------------------------------------------
 * Outbox(max_items, max_bytes, write=True): the items queued for one peer worker (worker.batching), written
 * as their batch's bytes when they are queued. A crossing item used to live as a Tuple (with its
 * values list and its edge id's int) from the emit to the flush, where pack_batch read it cold
 * and freed it (docs/profiles/w1-scaling-model.md: allocation and its cache misses were a third
 * of a crossing word); now the emit writes its target, values, root and edge id into the open
 * run's four columns (put_tuple, or send_edge without making the Tuple at all), and the flush
 * only joins the columns with their headers: the same bytes pack_batch writes for those items
 * (a root equal to its run's previous one is nil, serialize.SAME_ROOT, by value rather than by
 * identity: the receiver makes one int for both either way).
 *
 * An item that is not plain (a value of another type, several trees, a value larger than half
 * of max_bytes, an item of another kind) is queued as an object, for the serializer's Python
 * path to encode, check and refuse as before: a slow item closes the open batch, and take()
 * returns the queue in order as chunks, each bytes (a whole batch) or a list (flat: task, item,
 * ...), so a sender's items reach a task in the order they were sent. A batch is closed when it
 * holds max_items items or about max_bytes bytes. Nothing here runs Python code, so a put on
 * one loop's thread and a take on another's never see half of the other.
 */
typedef struct {
    Writer head, targets, values, roots, vals;  /* the open run's task and stream, and its columns without their headers */
    PyObject *src;                              /* the open run's source (held), or NULL */
    /* the source whose task and stream head holds (held), or NULL: kept when the run closes, so
     * that its source's next run (after a batch is closed) is begun with no attribute read */
    PyObject *head_src;
    Py_ssize_t count;
    int tracked, has_prev;
    unsigned long long prev_root;
    int gen;                     /* its edge values are the outbox's own, from gen_start on */
    unsigned long long gen_start;
} OpenRun;

typedef struct {
    PyObject_HEAD
    PyObject *chunks;      /* list: what take() returns */
    int slow_last;         /* the last chunk is a list that slow items go on being appended to */
    Writer body;           /* the open batch's closed runs */
    Py_ssize_t nruns;
    OpenRun run;
    Writer msg_targets[2], msg_fields[2];  /* acker messages (4 fields), spout replies (3) */
    Py_ssize_t nmsgs[2];
    Py_ssize_t items, queued;              /* in the open batch; in all */
    Py_ssize_t max_items, max_bytes;
    int write;                             /* 0: every item is kept as an object (a serializer of another format) */
    Writer scratch;                        /* an item's values, written before anything is changed */
    unsigned long long edge_state;         /* the splitmix64 state of the edge ids it draws (outbox_put_tuple) */
    /* the last item's task and root ints (held, so that the same object is the same value) and
     * their bits: a split's words go to one task, a sentence's with one root, and are not read again */
    PyObject *last_task, *last_root;
    unsigned long long last_task_bits, last_root_bits;
    /* words ([a short ASCII str] of the open run's source) that may still be written with no look
     * at the batch's room or the run's columns: granted after a word that was looked at, with
     * that room and those columns' capacity set aside (outbox_grant); 0 after anything else */
    Py_ssize_t credit;
} Outbox;

static PyTypeObject Outbox_Type;

#define OUTBOX_WRITERS(ob, X) X((ob)->body) X((ob)->run.head) X((ob)->run.targets) X((ob)->run.values) \
    X((ob)->run.roots) X((ob)->run.vals) X((ob)->msg_targets[0]) X((ob)->msg_targets[1]) \
    X((ob)->msg_fields[0]) X((ob)->msg_fields[1]) X((ob)->scratch)

/* the bytes of an array header for n items */
static inline Py_ssize_t
array_header_len(Py_ssize_t n)
{
    return n < 16 ? 1 : n < 65536 ? 3 : 5;
}

static inline char *
put_array_header(char *p, Py_ssize_t n)
{
    if (n < 16) {
        *p++ = (char)(0x90 | n);
    } else if (n < 65536) {
        *p++ = (char)0xdc;
        *p++ = (char)(n >> 8);
        *p++ = (char)n;
    } else {
        *p++ = (char)0xdd;
        for (int k = 3; k >= 0; k--)
            *p++ = (char)((uint64_t)n >> (8 * k));
    }
    return p;
}

static inline char *
put_bytes(char *p, const Writer *w)
{
    if (w->len)
        memcpy(p, w->buf, (size_t)w->len);
    return p + w->len;
}

/* an unsigned int in msgpack's shortest form; 9 bytes reserved before */
static inline void
w_u64(Writer *w, unsigned long long u)
{
    if (u < 128)
        w->buf[w->len++] = (char)u;
    else if (u < 256)
        w_be(w, 0xcc, u, 1);
    else if (u < 65536)
        w_be(w, 0xcd, u, 2);
    else if (u <= 0xffffffffULL)
        w_be(w, 0xce, u, 4);
    else
        w_be(w, 0xcf, u, 8);
}

/* a buffer grown by a large item is given back, so an outbox keeps no more than a batch of small items */
static inline void
w_reset(Writer *w)
{
    w->len = 0;
    if (w->cap > (1 << 20)) {
        PyMem_Free(w->buf);
        w->buf = NULL;
        w->cap = 0;
    }
}

/* A tracked emit's edge id drawn by the outbox it is written to: splitmix64, as IdSource draws
 * them, from the outbox's own state, so a run of such items needs only its first state on the
 * wire (the receiver draws the same ids, edge_of) instead of 9 bytes an item, which were a third
 * of a crossing word's bytes, each read, MACed at both ends and decoded */
static inline unsigned long long
edge_of(unsigned long long start, Py_ssize_t i)
{
    return splitmix64_mix(start + (unsigned long long)(i + 1) * SPLITMIX_GAMMA);
}

/* the open run into the open batch's body; 0, or -1 (no memory) */
static int
outbox_close_run(Outbox *ob)
{
    OpenRun *run = &ob->run;
    if (run->src == NULL)
        return 0;
    Py_ssize_t n = run->count, h = array_header_len(n);
    Py_ssize_t size = 1 + run->head.len + 2 * h + run->targets.len + run->values.len +
                      (run->tracked ? 2 * h + run->roots.len + run->vals.len + 9 : 2);
    if (w_reserve(&ob->body, size) < 0)
        return -1;
    char *p = ob->body.buf + ob->body.len;
    *p++ = (char)0x96;
    p = put_bytes(p, &run->head);
    p = put_bytes(put_array_header(p, n), &run->targets);
    p = put_bytes(put_array_header(p, n), &run->values);
    if (run->tracked) {
        p = put_bytes(put_array_header(p, n), &run->roots);
        if (run->gen) {  /* the run's first edge state: its items' ids are edge_of(it, i) */
            Writer w = {.buf = p, .len = 0, .cap = 9};
            w_u64(&w, run->gen_start);
            p += w.len;
        } else {
            p = put_bytes(put_array_header(p, n), &run->vals);
        }
    } else {  /* an untracked run: nil for its roots and its vals */
        *p++ = (char)0xc0;
        *p++ = (char)0xc0;
    }
    ob->body.len = p - ob->body.buf;  /* within size: a generated run's state takes at most 9 bytes */
    ob->nruns++;
    ob->credit = 0;
    Py_CLEAR(run->src);  /* head is kept, for head_src's next run */
    w_reset(&run->targets);
    w_reset(&run->values);
    w_reset(&run->roots);
    w_reset(&run->vals);
    run->count = 0;
    run->tracked = run->has_prev = run->gen = 0;
    return 0;
}

/* the open batch's bytes appended to chunks, and a new batch opened; 0, or -1 */
static int
outbox_close_batch(Outbox *ob)
{
    if (ob->items == 0)
        return 0;
    if (outbox_close_run(ob) < 0)
        return -1;
    Py_ssize_t size = 2 + array_header_len(ob->nruns) + ob->body.len;
    for (int k = 0; k < 2; k++)
        size += array_header_len(ob->nmsgs[k]) + ob->msg_targets[k].len +
                array_header_len(ob->nmsgs[k] * (k == 0 ? 4 : 3)) + ob->msg_fields[k].len;
    PyObject *data = PyBytes_FromStringAndSize(NULL, size);
    if (data == NULL)
        return -1;
    char *p = PyBytes_AS_STRING(data);
    *p++ = (char)0x96;
    *p++ = (char)0x02;  /* serialize.FORMAT */
    p = put_bytes(put_array_header(p, ob->nruns), &ob->body);
    for (int k = 0; k < 2; k++) {
        p = put_bytes(put_array_header(p, ob->nmsgs[k]), &ob->msg_targets[k]);
        p = put_bytes(put_array_header(p, ob->nmsgs[k] * (k == 0 ? 4 : 3)), &ob->msg_fields[k]);
    }
    assert(p == PyBytes_AS_STRING(data) + size);
    int rc = PyList_Append(ob->chunks, data);
    Py_DECREF(data);
    if (rc < 0)
        return -1;
    w_reset(&ob->body);
    ob->nruns = 0;
    for (int k = 0; k < 2; k++) {
        w_reset(&ob->msg_targets[k]);
        w_reset(&ob->msg_fields[k]);
        ob->nmsgs[k] = 0;
    }
    ob->items = 0;
    ob->slow_last = 0;
    ob->credit = 0;
    return 0;
}

/* the open batch's bytes, about (its closed runs, the open run's columns, its messages) */
static inline Py_ssize_t
outbox_size(Outbox *ob)
{
    return ob->body.len + ob->run.targets.len + ob->run.values.len + ob->run.roots.len + ob->run.vals.len +
           ob->msg_targets[0].len + ob->msg_fields[0].len + ob->msg_targets[1].len + ob->msg_fields[1].len;
}

/* room for an item of `size` bytes: the open batch closed first if it is full; 0, or -1 */
static inline int
outbox_room(Outbox *ob, Py_ssize_t size)
{
    if (ob->items > 0 && (ob->items >= ob->max_items || outbox_size(ob) + size + 64 > ob->max_bytes))
        return outbox_close_batch(ob);
    return 0;
}

/* a task id's 64 bits; -1 (no error) for anything else */
static inline int
task_bits(PyObject *task, unsigned long long *u)
{
    return PyLong_CheckExact(task) ? u64_of(task, u) : -1;
}

/* at least the most bytes a word ([a short ASCII str], under 32 bytes) adds to the open batch:
 * its target 9, its values 33, its root 9, its edge value 9 (60), rounded up */
#define WORD_BYTES 64
#define WORD_CREDIT_MAX 64

/* after a word written with the looks: how many more words may skip them (ob->credit), so many
 * that the batch's room (outbox_room's test) and its item count hold for each, with the run's
 * columns grown for them now. Out of memory, none (the next word's look raises it) */
static void
outbox_grant(Outbox *ob)
{
    OpenRun *run = &ob->run;
    Py_ssize_t c = (ob->max_bytes - outbox_size(ob) - 64) / WORD_BYTES - 1;
    if (c > ob->max_items - ob->items - 1)
        c = ob->max_items - ob->items - 1;
    if (c > WORD_CREDIT_MAX)
        c = WORD_CREDIT_MAX;
    if (c <= 0)
        return;
    if (w_reserve(&run->targets, 9 * c) < 0 || w_reserve(&run->values, 33 * c) < 0 ||
            w_reserve(&run->roots, 9 * c) < 0 || w_reserve(&run->vals, 9 * c) < 0) {
        PyErr_Clear();
        return;
    }
    ob->credit = c;
}

/* a Tuple's fields (val: its edge value's 64 bits), written into the open batch: 0; 1 when they
 * are not plain (nothing written); -1 with an error (no memory). With drawn not NULL, the edge id
 * is the outbox's to draw (a tracked emit's new edge, send_edge): it is put in *drawn.
 * Compiled into its callers (send_edge's crossing word): its call's frame was 17 instructions a word. */
static inline Py_ALWAYS_INLINE int
outbox_put_tuple_fields(Outbox *ob, PyObject *task, PyObject *values, PyObject *src, PyObject *root,
                        unsigned long long val, unsigned long long *drawn, PyObject *head_task,
                        PyObject *head_stream)
{
    unsigned long long t, rb;
    if (!ob->write || ob->chunks == NULL || !PyList_CheckExact(values) || !PyLong_CheckExact(root))
        return 1;
    if (task == ob->last_task) {
        t = ob->last_task_bits;
    } else {
        if (task_bits(task, &t) < 0)
            return 1;
        Py_XSETREF(ob->last_task, Py_NewRef(task));
        ob->last_task_bits = t;
    }
    if (root == ob->last_root) {
        rb = ob->last_root_bits;
    } else {
        if (u64_of(root, &rb) < 0)
            return 1;
        Py_XSETREF(ob->last_root, Py_NewRef(root));
        ob->last_root_bits = rb;
    }
    int gen = drawn != NULL;
    if (gen && rb == 0)  /* an edge without a tree: not the tracked emit this is for */
        return 1;
    Writer *s = &ob->scratch;
    s->len = 0;
    Py_ssize_t k = PyList_GET_SIZE(values), size;
    PyObject *word = k == 1 ? PyList_GET_ITEM(values, 0) : NULL;
    int rc;
    if (word != NULL && PyUnicode_CheckExact(word) && PyUnicode_IS_COMPACT_ASCII(word) && PyUnicode_GET_LENGTH(word) < 32) {
        size = 2 + PyUnicode_GET_LENGTH(word);  /* [word], a short ASCII str: written below, with no scratch */
    } else {
        word = NULL;
        rc = k < 16 ? w_reserve(s, 1) : W_ARRAY(s, k);
        if (rc < 0)
            return -1;
        if (k < 16)
            s->buf[s->len++] = (char)(0x90 | k);
        for (Py_ssize_t j = 0; j < k; j++)  /* no Python runs here: the list cannot change under us */
            if ((rc = w_plain(s, PyList_GET_ITEM(values, j))) != 0)
                return rc;
        if (s->len > ob->max_bytes / 2)  /* a large item: the serializer's path, which may refuse it */
            return 1;
        size = s->len;
    }
    OpenRun *run = &ob->run;
    /* a word of the open run within its credit: room and columns were set aside for it */
    int credited = word != NULL && ob->credit > 0 && src == run->src && run->gen == gen;
    if (credited) {
        ob->credit--;
    } else {
        ob->credit = 0;
        if (outbox_room(ob, size + 27) < 0)
            return -1;
        if (src != run->src || (run->count > 0 && run->gen != gen)) {  /* a run's edges are all drawn here, or all given */
            if (outbox_close_run(ob) < 0)
                return -1;
            if (src != run->head_src) {
                if (head_task == NULL)  /* not read before (outbox_put_tuple): cannot be, and not ours */
                    return 1;
                Py_CLEAR(run->head_src);
                run->head.len = 0;
                rc = w_plain(&run->head, head_task);
                if (rc == 0)
                    rc = w_plain(&run->head, head_stream);
                if (rc != 0)
                    return rc;  /* nothing of this item written: the run is empty, with no source */
                run->head_src = Py_NewRef(src);
            }
            run->src = Py_NewRef(src);
            run->gen = gen;
            run->gen_start = ob->edge_state;
        }
        if (w_reserve(&run->targets, 9) < 0 || w_reserve(&run->values, size) < 0 ||
                w_reserve(&run->roots, 9) < 0 || w_reserve(&run->vals, 9) < 0)
            return -1;
    }
    w_u64(&run->targets, t);
    char *p = run->values.buf + run->values.len;
    if (word != NULL) {
        p[0] = (char)0x91;
        p[1] = (char)(0xa0 | (size - 2));
        memcpy(p + 2, PyUnicode_DATA(word), (size_t)(size - 2));
    } else {
        memcpy(p, s->buf, (size_t)size);
    }
    run->values.len += size;
    if (run->has_prev && rb == run->prev_root)  /* the previous Tuple's root again (serialize.SAME_ROOT) */
        run->roots.buf[run->roots.len++] = (char)0xc0;
    else
        w_u64(&run->roots, rb);
    run->prev_root = rb;
    run->has_prev = 1;
    run->tracked |= rb != 0;
    if (gen) {  /* the run's count-th drawn id: the receiver's edge_of(gen_start, count) */
        *drawn = edge_of(ob->edge_state, 0);
        ob->edge_state += SPLITMIX_GAMMA;
    } else {
        w_u64(&run->vals, val);
    }
    run->count++;
    ob->items++;
    ob->queued++;
    ob->slow_last = 0;
    if (word != NULL && !credited)
        outbox_grant(ob);
    return 0;
}

/* outbox_put_tuple_fields for a Tuple that may begin a new run: its source's task and stream read
 * first, before anything of the item or the outbox is looked at, since reading them may run
 * Python code (a property) that changes the Tuple's values or puts into this outbox; its
 * values, source and root are held across it. (Read in the middle of the put, a property that
 * cleared the values freed the word being copied: a use after free.) */
static Py_NO_INLINE int
outbox_put_new_run(Outbox *ob, PyObject *task, PyObject *values, PyObject *src, PyObject *root,
                   unsigned long long val, unsigned long long *drawn)
{
    if (!ob->write || ob->chunks == NULL || !PyList_CheckExact(values) || !PyLong_CheckExact(root))
        return 1;
    Py_INCREF(values);
    Py_INCREF(src);
    Py_INCREF(root);
    int rc = -1;
    PyObject *head_task = PyObject_GetAttr(src, str_task);
    PyObject *head_stream = head_task ? PyObject_GetAttr(src, str_stream) : NULL;
    if (head_stream != NULL)
        rc = outbox_put_tuple_fields(ob, task, values, src, root, val, drawn, head_task, head_stream);
    Py_XDECREF(head_task);
    Py_XDECREF(head_stream);
    Py_DECREF(values);
    Py_DECREF(src);
    Py_DECREF(root);
    return rc;
}

/* a Tuple's fields written into the open batch, as outbox_put_tuple_fields; one of the source whose
 * task and stream are written already (every crossing word but a new source's first) with no look
 * at its source's attributes */
static inline Py_ALWAYS_INLINE int
outbox_put_tuple(Outbox *ob, PyObject *task, PyObject *values, PyObject *src, PyObject *root,
                 unsigned long long val, unsigned long long *drawn)
{
    if (src == ob->run.head_src)  /* its task and stream written already: no attribute to read */
        return outbox_put_tuple_fields(ob, task, values, src, root, val, drawn, NULL, NULL);
    return outbox_put_new_run(ob, task, values, src, root, val, drawn);
}

/* a message of kind k (0: an acker message, 1: a spout reply) to task t begun in the open batch,
 * counted, with room for `size` bytes of its fields: the Writer they go into, or NULL with an
 * error (no memory) */
static Writer *
outbox_message(Outbox *ob, int k, unsigned long long t, Py_ssize_t size)
{
    ob->credit = 0;  /* its bytes and its item were not set aside for words */
    if (outbox_room(ob, size + 9) < 0 || w_reserve(&ob->msg_targets[k], 9) < 0 ||
            w_reserve(&ob->msg_fields[k], size) < 0)
        return NULL;
    w_u64(&ob->msg_targets[k], t);
    ob->nmsgs[k]++;
    ob->items++;
    ob->queued++;
    ob->slow_last = 0;
    return &ob->msg_fields[k];
}

/* an acker message (4 fields) or a spout reply (3) written into the open batch; as outbox_put_tuple */
static int
outbox_put_fields(Outbox *ob, PyObject *task, PyObject *const *fields, Py_ssize_t size)
{
    unsigned long long t;
    if (!ob->write || ob->chunks == NULL || (size != 4 && size != 3) || task_bits(task, &t) < 0)
        return 1;
    Writer *s = &ob->scratch;
    s->len = 0;
    for (Py_ssize_t f = 0; f < size; f++) {
        int rc = w_plain(s, fields[f]);
        if (rc != 0)
            return rc;
    }
    if (s->len > ob->max_bytes / 2)
        return 1;
    Writer *w = outbox_message(ob, size == 4 ? 0 : 1, t, s->len);
    if (w == NULL)
        return -1;
    memcpy(w->buf + w->len, s->buf, (size_t)s->len);
    w->len += s->len;
    return 0;
}

/* an acker message or a spout reply, a tuple; as outbox_put_fields */
static int
outbox_put_message(Outbox *ob, PyObject *task, PyObject *msg)
{
    if (!PyTuple_CheckExact(msg))
        return 1;
    return outbox_put_fields(ob, task, ((PyTupleObject *)msg)->ob_item, PyTuple_GET_SIZE(msg));
}

/* the message of fields written into send's outbox when send is a Sender of one (a task in
 * another worker) and they are plain: 0; 1 when not (nothing written: the caller makes the
 * tuple and calls send); -1 with an error. A bolt's ack to an acker in another worker was a tuple
 * made, read once by the outbox and freed. */
static int
sender_put_message(PyObject *send, PyObject *const *fields, Py_ssize_t size)
{
    if (!Py_IS_TYPE(send, &Sender_Type) || ((Sender *)send)->outbox == NULL)
        return 1;
    return outbox_put_fields((Outbox *)((Sender *)send)->outbox, ((Sender *)send)->task, fields, size);
}

/* an acker message (kind, root, x, -1) written from its numbers into send's Outbox, as
 * outbox_put_fields writes it from objects: 0; 1 when send is not a Sender with an Outbox (or the
 * kind is not a small int), nothing written; -1 with an error */
static int
outbox_put_ack(PyObject *send, unsigned long long kind, unsigned long long root, unsigned long long x)
{
    if (!Py_IS_TYPE(send, &Sender_Type) || ((Sender *)send)->outbox == NULL || kind > 127)
        return 1;
    Outbox *ob = (Outbox *)((Sender *)send)->outbox;
    unsigned long long t;
    if (!ob->write || ob->chunks == NULL || task_bits(((Sender *)send)->task, &t) < 0)
        return 1;
    Writer *w = outbox_message(ob, 0, t, 19);
    if (w == NULL)
        return -1;
    w->buf[w->len++] = (char)kind;  /* a positive fixint */
    w_u64(w, root);
    w_u64(w, x);
    w->buf[w->len++] = (char)0xff;  /* -1, a negative fixint: the spout task a bolt's ack does not know */
    return 0;
}

/* task and item appended as objects, after the open batch (for the serializer's Python path); 0 or -1 */
static int
outbox_put_slow(Outbox *ob, PyObject *task, PyObject *item)
{
    if (ob->chunks == NULL) {  /* cleared by the collector: a sender outliving its transport */
        PyErr_SetString(PyExc_RuntimeError, "the outbox is gone");
        return -1;
    }
    if (outbox_close_batch(ob) < 0)
        return -1;
    if (!ob->slow_last) {
        PyObject *list = PyList_New(0);
        if (list == NULL)
            return -1;
        int rc = PyList_Append(ob->chunks, list);
        Py_DECREF(list);
        if (rc < 0)
            return -1;
        ob->slow_last = 1;
    }
    PyObject *list = PyList_GET_ITEM(ob->chunks, PyList_GET_SIZE(ob->chunks) - 1);
    if (PyList_Append(list, task) < 0)
        return -1;
    if (PyList_Append(list, item) < 0) {  /* no memory: take the task back, or the list is askew */
        Py_ssize_t n = PyList_GET_SIZE(list);
        PyList_SetSlice(list, n - 1, n, NULL);
        return -1;
    }
    ob->queued++;
    return 0;
}

/* Sender's: item written when plain (0), else 1 (nothing queued), or -1 */
static int
outbox_try(PyObject *ob, PyObject *task, PyObject *item, PyTypeObject *tt)
{
    if (Py_TYPE(item) == tt) {
        TupleBase *t = (TupleBase *)item;
        return outbox_put_tuple((Outbox *)ob, task, t->values, t->src, t->root, t->val, NULL);
    }
    return outbox_put_message((Outbox *)ob, task, item);
}

static int
outbox_slow(PyObject *ob, PyObject *task, PyObject *item)
{
    return outbox_put_slow((Outbox *)ob, task, item);
}

static PyObject *
Outbox_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"max_items", "max_bytes", "write", "seed", NULL};
    Py_ssize_t max_items, max_bytes;
    int write = 1;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nn|pK:Outbox", kwlist, &max_items, &max_bytes, &write, &seed))
        return NULL;
    if (max_items < 1) {
        PyErr_SetString(PyExc_ValueError, "Outbox: max_items must be 1 or more");
        return NULL;
    }
    Outbox *self = (Outbox *)type->tp_alloc(type, 0);  /* zeroed: every writer empty, no run open */
    if (self == NULL)
        return NULL;
    self->chunks = PyList_New(0);
    if (self->chunks == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->max_items = max_items;
    self->max_bytes = max_bytes;
    self->write = write;
    self->edge_state = seed;
    return (PyObject *)self;
}

static int
Outbox_traverse(Outbox *self, visitproc visit, void *arg)
{
    Py_VISIT(self->chunks);
    Py_VISIT(self->run.src);
    Py_VISIT(self->run.head_src);
    return 0;
}

static int
Outbox_clear(Outbox *self)
{
    Py_CLEAR(self->chunks);
    Py_CLEAR(self->run.src);
    Py_CLEAR(self->run.head_src);
    Py_CLEAR(self->last_task);
    Py_CLEAR(self->last_root);
    return 0;
}

static void
Outbox_dealloc(Outbox *self)
{
    PyObject_GC_UnTrack(self);
    Outbox_clear(self);
#define F(w) PyMem_Free((w).buf);
    OUTBOX_WRITERS(self, F)
#undef F
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Outbox_put(Outbox *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyType_Check(args[2]) || !PyType_IsSubtype((PyTypeObject *)args[2], &TupleBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "put(task, item, tuple_type: a TupleBase type)");
        return NULL;
    }
    if (self->chunks == NULL)
        return PyErr_NoMemory();
    int rc = outbox_try((PyObject *)self, args[0], args[1], (PyTypeObject *)args[2]);
    if (rc == 1)
        rc = outbox_put_slow(self, args[0], args[1]);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
Outbox_take(Outbox *self, PyObject *Py_UNUSED(ignored))
{
    if (self->chunks == NULL)
        return PyList_New(0);
    PyObject *fresh = PyList_New(0);  /* made first: nothing else can run between the close and the swap */
    if (fresh == NULL || outbox_close_batch(self) < 0) {
        Py_XDECREF(fresh);
        return NULL;
    }
    PyObject *chunks = self->chunks;
    self->chunks = fresh;
    self->queued = 0;
    self->slow_last = 0;
    return chunks;
}

static Py_ssize_t
Outbox_len(Outbox *self)
{
    return self->queued;
}

static PyMethodDef Outbox_methods[] = {
    {"put", (PyCFunction)(void (*)(void))Outbox_put, METH_FASTCALL,
     "put(task, item, tuple_type): queue item for task, written as bytes when it is plain."},
    {"take", (PyCFunction)Outbox_take, METH_NOARGS,
     "Everything queued, in order, as a list of chunks: bytes (a batch) or a list (flat: task, item, ...)."},
    {NULL}
};

static PySequenceMethods Outbox_as_sequence = {
    .sq_length = (lenfunc)Outbox_len,
};

static PyTypeObject Outbox_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.Outbox",
    .tp_basicsize = sizeof(Outbox),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Outbox(max_items, max_bytes, write=True): one peer worker's queued items, written as their "
              "batch's bytes when they are plain (and write is true); len() is the items queued.",
    .tp_new = Outbox_new,
    .tp_traverse = (traverseproc)Outbox_traverse,
    .tp_clear = (inquiry)Outbox_clear,
    .tp_dealloc = (destructor)Outbox_dealloc,
    .tp_methods = Outbox_methods,
    .tp_as_sequence = &Outbox_as_sequence,
};

/* send_edge: a tracked emit's delivery of values to task over a new edge (an id drawn from rand,
 * xored into *xor). To a Sender of an Outbox, the item is written there with no Tuple, values
 * copy made (a crossing item's objects were a third of its cost); to anything else,
 * or when the item is not plain, a Tuple is made and delivered as before (its edge value as bits). */
static int
send_edge(DeliverCache *c, PyObject *deliver, PyObject *task, PyTypeObject *tt, PyObject *values,
          PyObject *src, PyObject *root, PyObject *rand, unsigned long long *xor)
{
    unsigned long long e;
    PyObject *fn = deliver_fn(c, deliver, task);
    if (fn == NULL)
        return -1;
    if (Py_IS_TYPE(fn, &Sender_Type) && ((Sender *)fn)->outbox != NULL) {  /* the outbox draws the edge */
        int rc = outbox_put_tuple((Outbox *)((Sender *)fn)->outbox, ((Sender *)fn)->task, values, src, root, 0, &e);
        if (rc <= 0) {
            if (rc == 0)
                *xor ^= e;
            Py_DECREF(fn);
            return rc;
        }
    }
    if (draw_bits(rand, &e) < 0) {  /* squall's IdSource: without a call or an int */
        Py_DECREF(fn);
        return -1;
    }
    *xor ^= e;
    PyObject *t = tuple_make_bits(tt, values, src, root, e, 0);
    PyObject *r = t ? call_quick(fn, t) : NULL;
    Py_XDECREF(t);
    Py_DECREF(fn);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}


/* ---------------------------------------------------------------------------------------------
 * deliver_items(inboxes, items): append each item of a received batch (flat: task, item, task,
 * item, ...) to inboxes[task] (a dict of deques); items for tasks not there are dropped, as Storm
 * drops what comes for a task no longer in the worker. Returns how many were delivered.
 */
static PyObject *str_append;

static PyObject *
deliver_items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "deliver_items(inboxes: dict, items)");
        return NULL;
    }
    PyObject *inboxes = args[0];
    PyObject *items = PySequence_Fast(args[1], "a batch's items are not a sequence");
    if (items == NULL)
        return NULL;
    /* a batch holds runs of items for one task: its inbox's append is looked up once a run */
    PyObject *task = NULL, *append = NULL;
    Py_ssize_t delivered = 0, n = PySequence_Fast_GET_SIZE(items);
    if (n % 2) {
        PyErr_Format(PyExc_TypeError, "a received batch is flat, task then item: got %zd values", n);
        goto fail;
    }
    /* an inbox's append, a task's __eq__ or __hash__ may run Python code that changes items (a
     * list is walked in place): its length is read again at each item, and the task and item held
     * across the calls (read past its end, or freed under the call, it was a crash) */
    for (Py_ssize_t i = 0; i + 1 < PySequence_Fast_GET_SIZE(items); i += 2) {
        PyObject *t = Py_NewRef(PySequence_Fast_GET_ITEM(items, i));
        int same = task == NULL ? 0 : PyObject_RichCompareBool(t, task, Py_EQ);
        if (same < 0) {
            Py_DECREF(t);
            goto fail;
        }
        if (!same) {
            Py_CLEAR(append);
            Py_XSETREF(task, Py_NewRef(t));
            PyObject *q = PyDict_GetItemWithError(inboxes, t);
            if (q == NULL && PyErr_Occurred()) {
                Py_DECREF(t);
                goto fail;
            }
            if (q != NULL && (append = PyObject_GetAttr(q, str_append)) == NULL) {
                Py_DECREF(t);
                goto fail;
            }
        }
        Py_DECREF(t);
        if (append == NULL || i + 1 >= PySequence_Fast_GET_SIZE(items))  /* not (or no longer) a task here: dropped */
            continue;
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(items, i + 1));
        PyObject *r = PyObject_CallOneArg(append, item);
        Py_DECREF(item);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
        delivered++;
    }
    Py_XDECREF(task);
    Py_XDECREF(append);
    Py_DECREF(items);
    return PyLong_FromSsize_t(delivered);
fail:
    Py_XDECREF(task);
    Py_XDECREF(append);
    Py_DECREF(items);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * unpack_batch(data, source_of, tuple_type, words): the items of a batch that pack_batch (or
 * msgpack, the same bytes) wrote, decoded straight from its bytes into the flat list a decoder
 * returns (engine.serialize.Serializer.decode_batch: [target, item, ...], the Tuples first, then
 * acker messages, then spout replies), without msgpack's lists of columns, the pairs of zip and
 * the interleaving. Its values are plain (nil, bools, ints of 64 bits, floats, str, bin); for
 * anything else (an ext type, a map, a nested array, a batch of several trees a Tuple, bytes
 * that are not such a batch at all) it returns None, and the serializer decodes the batch with
 * msgpack, which rebuilds the value or words the error. The bytes have passed their MAC, but are
 * read as if hostile: every length is checked against the end before it is read.
 *
 * words is a list (its length a power of two) that remembers the short ASCII strs decoded
 * lately, each at the slot its bytes hash to: a word that comes again is the same str object,
 * so no str is made and freed for it, and the receiving bolt's dict finds it by identity with
 * its hash already computed (W1's words are Zipf-distributed: a few hundred make most of them).
 */
typedef struct {
    const unsigned char *p, *end;
    PyObject *words;  /* a list, or NULL */
} Reader;

#define R_NEED(r, n) ((r)->end - (r)->p >= (Py_ssize_t)(n))

static inline uint64_t
r_be(const unsigned char *p, int bytes)
{
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    switch (bytes) {  /* loaded whole and byte-swapped (w_be's reverse) */
    case 1: return p[0];
    case 2: { uint16_t b; memcpy(&b, p, 2); return __builtin_bswap16(b); }
    case 4: { uint32_t b; memcpy(&b, p, 4); return __builtin_bswap32(b); }
    case 8: { uint64_t b; memcpy(&b, p, 8); return __builtin_bswap64(b); }
    }
#endif
    uint64_t v = 0;
    for (int k = 0; k < bytes; k++)
        v = (v << 8) | p[k];
    return v;
}

/* an array's length into *n; 0, or -1 when the next value is not an array (or is cut short) */
static int
r_array(Reader *r, Py_ssize_t *n)
{
    if (!R_NEED(r, 1))
        return -1;
    unsigned char tag = *r->p;
    if (tag >= 0x90 && tag <= 0x9f) {
        *n = tag & 0x0f;
        r->p += 1;
    } else if (tag == 0xdc && R_NEED(r, 3)) {
        *n = (Py_ssize_t)r_be(r->p + 1, 2);
        r->p += 3;
    } else if (tag == 0xdd && R_NEED(r, 5)) {
        *n = (Py_ssize_t)r_be(r->p + 1, 4);
        r->p += 5;
    } else {
        return -1;
    }
    return *n <= r->end - r->p ? 0 : -1;  /* every item takes a byte at least */
}

/* the n <= 16 bytes at p as two 64-bit words that cover every byte, so that two byte strings of
 * the same length are equal exactly when their words are: the first and last 8 bytes (8 <= n),
 * the first and last 4 (4 <= n < 8, overlapping), or the first, middle and last byte */
static inline void
short_words(const unsigned char *p, Py_ssize_t n, uint64_t *a, uint64_t *b)
{
    if (n >= 8) {
        memcpy(a, p, 8);
        memcpy(b, p + n - 8, 8);
    } else if (n >= 4) {
        uint32_t x, y;
        memcpy(&x, p, 4);
        memcpy(&y, p + n - 4, 4);
        *a = x;
        *b = y;
    } else {
        *a = n > 0 ? (uint64_t)p[0] | (uint64_t)p[n >> 1] << 8 | (uint64_t)p[n - 1] << 16 : 0;
        *b = 0;
    }
}

/* a str of n bytes at p: from words when it is there, else made (and remembered when short ASCII).
 * A word of up to 16 bytes is hashed, checked for ASCII and compared from two loads (short_words)
 * instead of byte by byte: W1's words, 5 of a sentence crossing, were 80 instructions each here.
 * Compiled into its two readers: a call's frame a received word was a tenth of it. */
static inline Py_ALWAYS_INLINE PyObject *
r_str(Reader *r, const unsigned char *p, Py_ssize_t n)
{
    if (r->words == NULL || n > 32)
        return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    uint64_t a = 0, b = 0, h;
    if (n <= 16) {
        short_words(p, n, &a, &b);
        if ((a | b) & 0x8080808080808080ULL)
            return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
        h = ((a ^ (b * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)n) * 0xFF51AFD7ED558CCDULL) >> 32;
    } else {
        uint32_t f = 2166136261u;  /* FNV-1a, which also finds whether every byte is ASCII */
        unsigned char high = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            high |= p[k];
            f = (f ^ p[k]) * 16777619u;
        }
        if (high & 0x80)
            return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
        h = f;
    }
    Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)(PyList_GET_SIZE(r->words) - 1));
    PyObject *seen = PyList_GET_ITEM(r->words, slot);
    if (seen != Py_None && PyUnicode_GET_LENGTH(seen) == n) {
        const unsigned char *q = PyUnicode_1BYTE_DATA(seen);  /* ASCII: it was remembered so */
        if (n <= 16) {
            uint64_t c, d;
            short_words(q, n, &c, &d);
            if (c == a && d == b)
                return Py_NewRef(seen);
        } else if (memcmp(q, p, (size_t)n) == 0) {
            return Py_NewRef(seen);
        }
    }
    PyObject *s = PyUnicode_New(n, 127);
    if (s == NULL)
        return NULL;
    memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    PyList_SetItem(r->words, slot, Py_NewRef(s));  /* steals the new reference, frees the one before */
    return s;
}

/* the next plain value; NULL without an exception for anything else (the caller gives up) */
static PyObject *
r_plain(Reader *r)
{
    if (!R_NEED(r, 1))
        return NULL;
    const unsigned char *p = r->p;
    unsigned char tag = *p;
    Py_ssize_t n;
    if (tag <= 0x7f) {
        r->p += 1;
        return PyLong_FromLong(tag);
    }
    if (tag >= 0xe0) {
        r->p += 1;
        return PyLong_FromLong((long)(signed char)tag);
    }
    if (tag >= 0xa0 && tag <= 0xbf) {
        n = tag & 0x1f;
        p += 1;
        goto str;
    }
    switch (tag) {
    case 0xc0: r->p += 1; return Py_NewRef(Py_None);
    case 0xc2: r->p += 1; return Py_NewRef(Py_False);
    case 0xc3: r->p += 1; return Py_NewRef(Py_True);
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
        int bytes = 1 << (tag - 0xcc);
        if (!R_NEED(r, 1 + bytes))
            return NULL;
        r->p += 1 + bytes;
        return PyLong_FromUnsignedLongLong(r_be(p + 1, bytes));
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        int bytes = 1 << (tag - 0xd0);
        if (!R_NEED(r, 1 + bytes))
            return NULL;
        uint64_t u = r_be(p + 1, bytes);
        int shift = 64 - 8 * bytes;  /* sign-extend from its width */
        long long v = shift ? (long long)(u << shift) >> shift : (long long)u;
        r->p += 1 + bytes;
        return PyLong_FromLongLong(v);
    }
    case 0xca: case 0xcb: {
        if (!R_NEED(r, tag == 0xca ? 5 : 9))
            return NULL;
        double d;
        if (tag == 0xca) {
            uint32_t bits = (uint32_t)r_be(p + 1, 4);
            float f;
            memcpy(&f, &bits, 4);
            d = f;
        } else {
            uint64_t bits = r_be(p + 1, 8);
            memcpy(&d, &bits, 8);
        }
        r->p += tag == 0xca ? 5 : 9;
        return PyFloat_FromDouble(d);
    }
    case 0xd9: case 0xda: case 0xdb: case 0xc4: case 0xc5: case 0xc6: {
        int bytes = tag == 0xd9 || tag == 0xc4 ? 1 : tag == 0xda || tag == 0xc5 ? 2 : 4;
        if (!R_NEED(r, 1 + bytes))
            return NULL;
        n = (Py_ssize_t)r_be(p + 1, bytes);
        p += 1 + bytes;
        if (tag <= 0xc6) {  /* bin */
            if (r->end - p < n)
                return NULL;
            r->p = p + n;
            return PyBytes_FromStringAndSize((const char *)p, n);
        }
        goto str;
    }
    default:
        return NULL;
    }
str:
    if (r->end - p < n)
        return NULL;
    r->p = p + n;
    return r_str(r, p, n);
}

/* an empty list with room for n items (a Tuple's values: a kept list when there is one); NULL
 * with an error (no memory) */
static PyObject *
values_list(Py_ssize_t n, int tuple_values)
{
    /* its items' array not zeroed (PyList_New(n) callocs it): the list's size grows as each is
     * set, so a collection run by an allocation meanwhile sees only set items; n is within what
     * is left of the bytes (r_array), so a hostile length allocates no more than they could */
    PyObject *list = NULL;
    if (tuple_values && n >= 1 && n <= LIST_KEEP_ITEMS && kept_list(n, &list) < 0)
        return NULL;
    if (list == NULL && (list = PyList_New(0)) == NULL)
        return NULL;
    if (n > 0 && ((PyListObject *)list)->allocated < n) {  /* a new list */
        PyObject **items = PyMem_Malloc(sizeof(PyObject *) * (size_t)n);
        if (items == NULL) {
            Py_DECREF(list);
            return PyErr_NoMemory();
        }
        ((PyListObject *)list)->ob_item = items;
        ((PyListObject *)list)->allocated = n;
    }
    return list;
}

/* the next n plain values as a list (a Tuple's values: from the kept lists when there is one);
 * NULL as r_plain */
static PyObject *
r_values(Reader *r, Py_ssize_t n, int tuple_values)
{
    PyObject *list = values_list(n, tuple_values);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = r_plain(r);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, v);
        Py_SET_SIZE(list, i + 1);
    }
    return list;
}

/* a Tuple's values, the next array of plain values, as a list; NULL as r_plain. W1's words,
 * [a short str], are read without r_array's and r_plain's dispatch on their tags */
static PyObject *
r_tuple_values(Reader *r)
{
    const unsigned char *p = r->p;
    if (R_NEED(r, 2) && p[0] == 0x91 && (p[1] & 0xe0) == 0xa0) {
        Py_ssize_t n = p[1] & 0x1f;
        if (r->end - p - 2 < n)
            return NULL;
        PyObject *list = values_list(1, 1);
        if (list == NULL)
            return NULL;
        PyObject *v = r_str(r, p + 2, n);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        r->p = p + 2 + n;
        PyList_SET_ITEM(list, 0, v);
        Py_SET_SIZE(list, 1);
        return list;
    }
    Py_ssize_t n;
    return r_array(r, &n) < 0 ? NULL : r_values(r, n, 1);
}

/* Where decoded items go: the flat list out (unpack_batch), or, with out NULL, a list of items per
 * target (unpack_into), which are appended to their inboxes only once the whole batch has decoded
 * (a batch left to msgpack's path half way must have delivered nothing) */
#define SINK_TARGETS 32  /* a batch for more targets than this is left to unpack_batch's path */
typedef struct {
    PyObject *out;
    Py_ssize_t n;
    PyObject *task[SINK_TARGETS], *items[SINK_TARGETS];  /* held */
    /* task[k]'s value when it is an int of 64 bits (has_bits[k]): a run's targets are read as
     * numbers, and found here without an int made or compared */
    unsigned long long bits[SINK_TARGETS];
    char has_bits[SINK_TARGETS];
} Sink;

/* the list of target's items in sink, made at its first; borrowed, or NULL (an error is set only
 * when there is no memory: more targets than SINK_TARGETS is "not ours" without one) */
static PyObject *
sink_list(Sink *sink, PyObject *target)
{
    for (Py_ssize_t k = sink->n - 1; k >= 0; k--)  /* tasks of up to 256 are the same int object */
        if (sink->task[k] == target)
            return sink->items[k];
    for (Py_ssize_t k = 0; k < sink->n; k++) {
        int same = PyObject_RichCompareBool(sink->task[k], target, Py_EQ);
        if (same < 0)
            return NULL;
        if (same)
            return sink->items[k];
    }
    if (sink->n == SINK_TARGETS)
        return NULL;
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    unsigned long long u;
    sink->has_bits[sink->n] = PyLong_CheckExact(target) && u64_of(target, &u) == 0;
    sink->bits[sink->n] = sink->has_bits[sink->n] ? u : 0;
    sink->task[sink->n] = Py_NewRef(target);
    sink->items[sink->n++] = list;
    return list;
}

/* sink_list for a target read as a number */
static PyObject *
sink_list_bits(Sink *sink, unsigned long long bits)
{
    for (Py_ssize_t k = sink->n - 1; k >= 0; k--)
        if (sink->has_bits[k] && sink->bits[k] == bits)
            return sink->items[k];
    PyObject *target = PyLong_FromUnsignedLongLong(bits);
    if (target == NULL)
        return NULL;
    PyObject *list = sink_list(sink, target);
    Py_DECREF(target);
    return list;
}

/* room in list, one of a sink's (no Python code has seen it), for `extra` more items: stored then
 * with no PyList_Append's check and growth an item; -1 (no memory) */
static int
list_reserve(PyObject *list, Py_ssize_t extra)
{
    PyListObject *l = (PyListObject *)list;
    Py_ssize_t want = Py_SIZE(l) + extra;
    if (l->allocated >= want)
        return 0;
    want += want >> 3;
    PyObject **items = PyMem_Realloc(l->ob_item, sizeof(PyObject *) * (size_t)want);
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    l->ob_item = items;
    l->allocated = want;
    return 0;
}

static void
sink_clear(Sink *sink)
{
    for (Py_ssize_t k = 0; k < sink->n; k++) {
        Py_DECREF(sink->task[k]);
        Py_DECREF(sink->items[k]);
    }
    sink->n = 0;
}

/* target, then item, into sink (stealing item); -1 on an error */
static int
out_pair(Sink *sink, PyObject *target, PyObject *item)
{
    if (item == NULL)
        return -1;
    PyObject *out = sink->out;
    int rc;
    if (out == NULL) {
        PyObject *list = sink_list(sink, target);
        rc = list == NULL ? -1 : PyList_Append(list, item);
    } else if ((rc = PyList_Append(out, target)) == 0 && (rc = PyList_Append(out, item)) < 0) {
        Py_ssize_t len = PyList_GET_SIZE(out);  /* no memory: take the target back */
        PyList_SetSlice(out, len - 1, len, NULL);
    }
    Py_DECREF(item);
    return rc;
}

/* n unsigned ints of 64 bits (an array's items, its header read: a run's targets) into vs; -1
 * for anything else */
static int
r_u64_items(Reader *r, Py_ssize_t n, unsigned long long *vs)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!R_NEED(r, 1))
            return -1;
        unsigned char tag = *r->p;
        if (tag <= 0x7f) {
            vs[i] = tag;
            r->p += 1;
        } else if (tag >= 0xcc && tag <= 0xcf) {
            int bytes = 1 << (tag - 0xcc);
            if (!R_NEED(r, 1 + bytes))
                return -1;
            vs[i] = r_be(r->p + 1, bytes);
            r->p += 1 + bytes;
        } else {
            return -1;
        }
    }
    return 0;
}

/* the next array, of n unsigned ints of 64 bits, into vs (a run's vals: edge values, which a
 * Tuple holds as 64 bits, so no int is made for them); -1 for anything else (another value,
 * another length), which the caller leaves to msgpack's path */
static int
r_u64s(Reader *r, Py_ssize_t n, unsigned long long *vs)
{
    Py_ssize_t k;
    if (r_array(r, &k) < 0 || k != n)
        return -1;
    return r_u64_items(r, n, vs);
}

/* a run's vals into vs: an array of n ids (r_u64s), or one unsigned int, the state its sender's
 * outbox drew them from (edge_of); -1 for anything else */
static int
r_vals(Reader *r, Py_ssize_t n, unsigned long long *vs)
{
    if (!R_NEED(r, 1))
        return -1;
    unsigned char tag = *r->p;
    if (tag > 0x7f && (tag < 0xcc || tag > 0xcf))
        return r_u64s(r, n, vs);
    unsigned long long start;
    if (tag <= 0x7f) {
        start = tag;
        r->p += 1;
    } else {
        int bytes = 1 << (tag - 0xcc);
        if (!R_NEED(r, 1 + bytes))
            return -1;
        start = r_be(r->p + 1, bytes);
        r->p += 1 + bytes;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        vs[i] = edge_of(start, i);
    return 0;
}

/* the next value when it is an int of 0 .. 2**64 - 1 in msgpack's unsigned forms, into *u: 0;
 * else -1 with nothing read (the caller takes r_plain's path) */
static inline int
r_uint(Reader *r, unsigned long long *u)
{
    if (!R_NEED(r, 1))
        return -1;
    unsigned char tag = *r->p;
    if (tag <= 0x7f) {
        *u = tag;
        r->p += 1;
        return 0;
    }
    if (tag < 0xcc || tag > 0xcf)
        return -1;
    int bytes = 1 << (tag - 0xcc);
    if (!R_NEED(r, 1 + bytes))
        return -1;
    *u = r_be(r->p + 1, bytes);
    r->p += 1 + bytes;
    return 0;
}

/* one run [src_task, stream, targets, values, roots, vals] of Tuples into out; -1.
 * Its columns are read into one C array (values lists, roots, and targets and vals as numbers)
 * rather than a Python list each: three lists of a run's length made, zeroed, filled, walked and
 * freed were ~15% of decoding, delivering and freeing a received W1 word. Its items go to their
 * target's list in room made once for each stretch of one target (a whole run, mostly). A run's roots are mostly nil (the
 * previous Tuple's root, serialize.SAME_ROOT): a root slot holds a new reference, or NULL for nil. */
static int
r_run(Reader *r, Sink *out, PyObject *source_of, PyTypeObject *tt)
{
    Py_ssize_t six, n;
    if (r_array(r, &six) < 0 || six != 6)
        return -1;
    PyObject *task = r_plain(r);
    PyObject *stream = task ? r_plain(r) : NULL;
    PyObject *src = stream ? PyObject_CallFunctionObjArgs(source_of, task, stream, NULL) : NULL;
    Py_XDECREF(task);
    Py_XDECREF(stream);
    if (src == NULL || r_array(r, &n) < 0) {  /* an unknown source: the Python path words it */
        Py_XDECREF(src);
        return -1;
    }
    /* n: the targets' array, now to be read */
    int rc = -1;
    Py_ssize_t k, have_values = 0, have_roots = 0, made = 0;
    /* n values, n roots (NULL: nil), then n targets and the vals' n + 1 as 64-bit ints */
    PyObject **cols = PyMem_Malloc(sizeof(PyObject *) * 2 * (size_t)n + sizeof(unsigned long long) * (size_t)(2 * n + 1));
    if (cols == NULL)
        goto done;
    PyObject **values = cols, **roots = cols + n;
    unsigned long long *targets = (unsigned long long *)(cols + 2 * n), *vals = targets + n;
    if (r_u64_items(r, n, targets) < 0)  /* task ids: unsigned ints, as every encoder writes them */
        goto done;
    if (r_array(r, &k) < 0 || k != n)
        goto done;
    for (; have_values < n; have_values++)
        if ((values[have_values] = r_tuple_values(r)) == NULL)
            goto done;
    int tracked = !(R_NEED(r, 2) && r->p[0] == 0xc0 && r->p[1] == 0xc0);
    if (!tracked) {
        r->p += 2;  /* an untracked run: nil for its roots and its vals */
    } else {
        if (r_array(r, &k) < 0 || k != n)
            goto done;
        for (; have_roots < n; have_roots++) {
            unsigned long long u;
            PyObject *v;
            if (R_NEED(r, 1) && *r->p == 0xc0) {
                r->p += 1;
                v = NULL;
            } else if ((v = r_uint(r, &u) == 0 ? PyLong_FromUnsignedLongLong(u) : r_plain(r)) == NULL ||
                       !PyLong_CheckExact(v)) {
                Py_XDECREF(v);
                goto done;
            }
            roots[have_roots] = v;
        }
        if (r_vals(r, n, vals) < 0)
            goto done;
    }
    PyObject *root = NULL, *list = NULL;
    for (; made < n; made++) {
        if (tracked && roots[made] != NULL)
            root = roots[made];  /* borrowed from roots */
        else if (tracked && root == NULL)
            goto done;  /* a run that begins with "the previous tuple's root" */
        PyObject *t = tuple_make_bits(tt, values[made], src, tracked ? root : ZERO, tracked ? vals[made] : 0, 0);
        if (t == NULL)
            goto done;
        if (out->out != NULL) {  /* the flat list: its target as an int */
            PyObject *target = PyLong_FromUnsignedLongLong(targets[made]);
            if (target == NULL) {
                Py_DECREF(t);
                goto done;
            }
            int put = out_pair(out, target, t);  /* takes t */
            Py_DECREF(target);
            if (put < 0)
                goto done;
            continue;
        }
        if (list == NULL || targets[made] != targets[made - 1]) {
            /* the next items for this target (all of a run, mostly), stored in room made once */
            Py_ssize_t same = 1;
            while (made + same < n && targets[made + same] == targets[made])
                same++;
            if ((list = sink_list_bits(out, targets[made])) == NULL || list_reserve(list, same) < 0) {
                Py_DECREF(t);
                goto done;
            }
        }
        PyList_SET_ITEM(list, Py_SIZE(list), t);
        Py_SET_SIZE(list, Py_SIZE(list) + 1);
    }
    rc = 0;
done:
    if (cols != NULL) {
        for (Py_ssize_t i = 0; i < have_values; i++)
            Py_DECREF(values[i]);
        for (Py_ssize_t i = 0; i < have_roots; i++)
            Py_XDECREF(roots[i]);
        PyMem_Free(cols);
    }
    Py_DECREF(src);
    return rc;
}

/* size-tuples of plain values for count targets (acker messages: 4; spout replies: 3); -1 */
static int
r_messages(Reader *r, Sink *out, Py_ssize_t size)
{
    Py_ssize_t n, k;
    PyObject *targets = r_array(r, &n) < 0 ? NULL : r_values(r, n, 0);
    if (targets == NULL)
        return -1;
    int rc = -1;
    for (Py_ssize_t i = 0; i < n; i++)  /* task ids: ints, else msgpack's path refuses the batch */
        if (!PyLong_CheckExact(PyList_GET_ITEM(targets, i)))
            goto done;
    if (r_array(r, &k) < 0 || k != n * size)
        goto done;
    if (size == 4 && n > 0)
        roots_from_elsewhere = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = PyTuple_New(size);
        if (msg == NULL)
            goto done;
        for (Py_ssize_t f = 0; f < size; f++) {
            unsigned long long u;  /* a kind, a root, an xor: unsigned ints, read without r_plain's switch */
            PyObject *v = r_uint(r, &u) != 0 ? r_plain(r) : f == 1 ? root_of_bits(u) : PyLong_FromUnsignedLongLong(u);
            if (v == NULL) {
                Py_DECREF(msg);
                goto done;
            }
            PyTuple_SET_ITEM(msg, f, v);
        }
        if (out_pair(out, PyList_GET_ITEM(targets, i), msg) < 0)
            goto done;
    }
    rc = 0;
done:
    Py_DECREF(targets);
    return rc;
}

/* the whole batch in view into sink: 0, or -1 when it is not a batch of plain values (or on
 * an error: the caller clears it, and msgpack's path decodes the batch or words the error) */
static int
unpack_view(Py_buffer *view, PyObject *source_of, PyTypeObject *tt, PyObject *words, Sink *sink)
{
    Reader r = {(const unsigned char *)view->buf, (const unsigned char *)view->buf + view->len, words};
    Py_ssize_t n, nruns;
    if (r_array(&r, &n) < 0 || n != 6 || !R_NEED(&r, 1) || *r.p != 0x02)  /* serialize.FORMAT */
        return -1;
    r.p += 1;
    if (r_array(&r, &nruns) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < nruns; i++)
        if (r_run(&r, sink, source_of, tt) < 0)
            return -1;
    if (r_messages(&r, sink, 4) < 0 || r_messages(&r, sink, 3) < 0 || r.p != r.end)
        return -1;
    return 0;
}

static int
unpack_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, const char *usage)
{
    if (nargs != want || !PyType_Check(args[2]) || !PyType_IsSubtype((PyTypeObject *)args[2], &TupleBase_Type) ||
            !PyList_Check(args[3]) || PyList_GET_SIZE(args[3]) == 0 ||
            (PyList_GET_SIZE(args[3]) & (PyList_GET_SIZE(args[3]) - 1)) || (want == 5 && !PyDict_Check(args[4]))) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    return 0;
}

static PyObject *
unpack_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (unpack_args(args, nargs, 4, "unpack_batch(data, source_of, tuple_type: a TupleBase type, "
                                    "words: a list whose length is a power of two)") < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Sink sink = {.out = PyList_New(0)};
    if (sink.out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (unpack_view(&view, args[1], (PyTypeObject *)args[2], args[3], &sink) < 0) {
        /* not a batch of plain values, or not a batch: msgpack's path decodes it or words the
           error (a MemoryError too: it meets the same) */
        PyErr_Clear();
        Py_CLEAR(sink.out);
    }
    PyBuffer_Release(&view);
    return sink.out != NULL ? sink.out : Py_NewRef(Py_None);
}

/* ---------------------------------------------------------------------------------------------
 * unpack_into(data, source_of, tuple_type, words, inboxes): unpack_batch's items appended straight
 * to their inboxes (a dict of deques by task; items for a task not there are dropped, as Storm
 * drops what comes for a task no longer in the worker), with no flat list of [target, item, ...]
 * made, grown, walked and freed, and one inbox.extend a target instead of a call of its append an
 * item. Returns the items delivered, or None with nothing delivered (a batch unpack_batch would
 * leave to msgpack, or one for more than SINK_TARGETS tasks): the caller decodes it the long way.
 */
static PyObject *str_extend;

static PyObject *
unpack_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (unpack_args(args, nargs, 5, "unpack_into(data, source_of, tuple_type: a TupleBase type, "
                                    "words: a list whose length is a power of two, inboxes: dict)") < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Sink sink = {.out = NULL, .n = 0};
    int rc = unpack_view(&view, args[1], (PyTypeObject *)args[2], args[3], &sink);
    PyBuffer_Release(&view);
    if (rc < 0) {
        PyErr_Clear();
        sink_clear(&sink);
        Py_RETURN_NONE;
    }
    Py_ssize_t delivered = 0;
    for (Py_ssize_t k = 0; k < sink.n; k++) {
        PyObject *q = PyDict_GetItemWithError(args[4], sink.task[k]);
        if (q == NULL) {
            if (PyErr_Occurred())
                goto fail;
            continue;  /* not (or no longer) a task here: dropped */
        }
        PyObject *r = PyObject_CallMethodOneArg(q, str_extend, sink.items[k]);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
        delivered += PyList_GET_SIZE(sink.items[k]);
    }
    sink_clear(&sink);
    return PyLong_FromSsize_t(delivered);
fail:
    sink_clear(&sink);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * ExecutingEntry(memory, offset): 16 bytes of a writable buffer at offset (a multiple of 8), the
 * line of one bolt executor on its worker's board (squall.engine.executing): the root of the
 * input it is executing now (0: none) and its task. execute_run and drain_inbox store the root of
 * each input before its execute and 0 after it: two 64-bit stores, no allocation (with the root's
 * read, 43 instructions an execute under cachegrind: 551 against 508 for a run of one-tuple
 * executes of an empty Python bolt). The buffer is
 * held (an mmap cannot be closed or resized under it) until the entry is freed.
 */
typedef struct {
    PyObject_HEAD
    Py_buffer view;
    unsigned long long *line;  /* [0]: the root, [1]: the task (as a signed 64-bit int) */
} ExecutingEntry;

static PyTypeObject ExecutingEntry_Type;

static PyObject *
ExecutingEntry_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *memory;
    Py_ssize_t offset;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "ExecutingEntry(memory, offset) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "On:ExecutingEntry", &memory, &offset))
        return NULL;
    ExecutingEntry *self = (ExecutingEntry *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (PyObject_GetBuffer(memory, &self->view, PyBUF_WRITABLE) < 0) {
        self->view.obj = NULL;
        Py_DECREF(self);
        return NULL;
    }
    char *at = (char *)self->view.buf + offset;
    if (offset < 0 || offset % 8 != 0 || offset > self->view.len - 16 || ((uintptr_t)at) % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "ExecutingEntry: offset %zd is not an 8-byte aligned place for 16 bytes "
                     "in a buffer of %zd", offset, self->view.len);
        Py_DECREF(self);
        return NULL;
    }
    self->line = (unsigned long long *)at;
    return (PyObject *)self;
}

static void
ExecutingEntry_dealloc(ExecutingEntry *self)
{
    if (self->view.obj != NULL)
        PyBuffer_Release(&self->view);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
ExecutingEntry_get_root(ExecutingEntry *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&self->line[0], __ATOMIC_RELAXED));
}

static int
ExecutingEntry_set_root(ExecutingEntry *self, PyObject *value, void *Py_UNUSED(closure))
{
    unsigned long long root = value ? PyLong_AsUnsignedLongLong(value) : 0;
    if (root == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    __atomic_store_n(&self->line[0], root, __ATOMIC_RELAXED);
    return 0;
}

static PyObject *
ExecutingEntry_get_task(ExecutingEntry *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong((long long)__atomic_load_n(&self->line[1], __ATOMIC_RELAXED));
}

static int
ExecutingEntry_set_task(ExecutingEntry *self, PyObject *value, void *Py_UNUSED(closure))
{
    long long task = value ? PyLong_AsLongLong(value) : -1;
    if (task == -1 && PyErr_Occurred())
        return -1;
    __atomic_store_n(&self->line[1], (unsigned long long)task, __ATOMIC_RELAXED);
    return 0;
}

static PyGetSetDef ExecutingEntry_getset[] = {
    {"root", (getter)ExecutingEntry_get_root, (setter)ExecutingEntry_set_root,
     "the root of the input being executed (0: none)", NULL},
    {"task", (getter)ExecutingEntry_get_task, (setter)ExecutingEntry_set_task,
     "the task whose inputs are executed", NULL},
    {NULL}
};

static PyTypeObject ExecutingEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.ExecutingEntry",
    .tp_basicsize = sizeof(ExecutingEntry),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ExecutingEntry(memory, offset): a bolt executor's line (root, task) of 16 bytes at offset in the "
              "writable buffer memory.",
    .tp_new = ExecutingEntry_new,
    .tp_dealloc = (destructor)ExecutingEntry_dealloc,
    .tp_getset = ExecutingEntry_getset,
};

/* the line to store the roots of executed inputs in (NULL: none, for None) */
static inline unsigned long long *
executing_line(PyObject *executing)
{
    return executing != NULL && Py_IS_TYPE(executing, &ExecutingEntry_Type) ? ((ExecutingEntry *)executing)->line
                                                                             : NULL;
}

/* the root of a tuple of one tree (0 for any other input: untracked, of several trees, a tick) */
static inline unsigned long long
executing_root(PyObject *item)
{
    if (!is_a(item, &TupleBase_Type, &seen_tuple))
        return 0;
    unsigned long long r;
    return u64_of(((TupleBase *)item)->root, &r) == 0 ? r : 0;  /* a dict of roots: 0 */
}

/* ---------------------------------------------------------------------------------------------
 * execute_run(execute, pop, n, stats, on_error=None, executing=None): execute(pop()) n times,
 * adding each input executed to stats.executed as it returns (those before one that raised, on an
 * exception): a bolt executor's plain inputs between two sampled ones
 * (squall.engine.bolt_executor.BoltExecutor.drain, through drain_inbox). With on_error, an
 * Exception that execute raises is handed to on_error(input, exception) and the run goes on (the
 * input counts as executed); what on_error raises ends the run. With executing (an
 * ExecutingEntry), each input's root is on its line while it is executed.
 */

/* no deadline (a monotonic clock's time is never negative) */
#define NO_DEADLINE (-1.0)

/* CLOCK_MONOTONIC_COARSE in seconds: time.monotonic()'s clock as of the last timer tick (a few
 * ms behind at most: nothing next to a drain's budget, DRAIN_BUDGET_SECS, 0.1 s), a load of the
 * vDSO's page instead of a counter read and its scaling, once per input of a drain */
static inline double
coarse_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int
past_deadline(double deadline)
{
    return deadline >= 0.0 && coarse_now() >= deadline;
}

/* execute raised (the error is set): hand an Exception to on_error(item, exception); 0 when it
 * returned (error cleared), -1 with the error to raise (execute's, or on_error's) */
static int
on_execute_error(PyObject *on_error, PyObject *item)
{
    if (on_error == NULL || !PyErr_ExceptionMatches(PyExc_Exception))
        return -1;  /* KeyboardInterrupt, SystemExit and the like are never caught */
    return hand_error_to(on_error, item);
}

/* execute_run's work, also drain_inbox's: the inputs executed (>= 0), or -1 with the error set
 * (the inputs before it counted). With a deadline (coarse_now()'s time; NO_DEADLINE: none), the
 * run ends after the first input that returns at or past it. */
static Py_ssize_t
run_inputs(PyObject *execute, PyObject *pop, Py_ssize_t n, PyObject *stats, PyObject *on_error,
           unsigned long long *line, double deadline)
{
    Py_ssize_t done = 0;
    /* a BasicBolt's task: its BasicExecute called at once, without the vectorcall's dispatch and
     * result check (it returns a result or sets an error, never both) */
    int basic = Py_IS_TYPE(execute, &BasicExecute_Type);
    /* a plain Bolt's task: its execute, a bound method of a Python function, is that function
     * called with the bolt as its first argument through the function's own vectorcall (the
     * bound method's call and PyObject_Vectorcall's result check spared: it returns a result or
     * sets an error). Borrowed: execute holds them. */
    PyObject *fn = NULL, *fself = NULL;
    vectorcallfunc fcall = NULL;
    if (!basic && PyMethod_Check(execute) && PyFunction_Check(PyMethod_GET_FUNCTION(execute))) {
        fn = PyMethod_GET_FUNCTION(execute);
        fself = PyMethod_GET_SELF(execute);
        fcall = PyVectorcall_Function(fn);
    }
    while (done < n) {
        PyObject *item = call_quick(pop, NULL);
        if (item == NULL)
            return -1;
        PyObject *args[3] = {NULL, fself, item};  /* the slot before the arguments for a bound method's self */
        if (line != NULL)
            __atomic_store_n(line, executing_root(item), __ATOMIC_RELAXED);
        PyObject *r = basic ? BasicExecute_call((BasicExecute *)execute, args + 2, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                      : fcall ? fcall(fn, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                              : PyObject_Vectorcall(execute, args + 2, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (line != NULL)
            __atomic_store_n(line, 0ULL, __ATOMIC_RELAXED);
        int handled = r == NULL ? on_execute_error(on_error, item) : 0;
        Py_DECREF(item);
        if (handled < 0)
            return -1;
        Py_XDECREF(r);
        done++;
        /* counted as it returns, not at the run's end: a bolt slow on each input (0.5 s) showed
         * acked 31 and executed 14 after 16 s, its runs being up to 19 inputs long */
        if (count(stats, &TaskStatsBase_Type, &seen_task_stats, offsetof(TaskStatsBase, executed), str_executed, 1) < 0)
            return -1;
        if (past_deadline(deadline))
            break;
    }
    return done;
}

static PyObject *
execute_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 4 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "execute_run(execute, pop, n, stats, on_error=None, executing=None)");
        return NULL;
    }
    PyObject *on_error = nargs >= 5 && args[4] != Py_None ? args[4] : NULL;
    unsigned long long *line = executing_line(nargs == 6 ? args[5] : NULL);
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t done = run_inputs(args[0], args[1], n, args[3], on_error, line, NO_DEADLINE);
    return done < 0 ? NULL : PyLong_FromSsize_t(done);
}

/* ---------------------------------------------------------------------------------------------
 * drain_inbox(execute, pop, n, stats, sampled, now, on_error=None, executing=None, budget=None): a bolt
 * task's n inputs (ending early after the first input that returns once the drain has run for
 * budget seconds), as
 * squall._native.drain_inbox (its Python twin says what is done; this is the same, step by step,
 * without a Python frame per sampled input).
 */

/* gaps(), the next gap of a task's sampler (squall.engine.stats._gaps), as a long long (-1 with
 * an error): the __next__ of an iterator of a compiled type (that chain) is called through the
 * iterator's tp_iternext, without the method-wrapper's generic call (about 190 instructions a
 * sampled event). The iterators of the last GAPS_SEEN gaps are remembered (a loop's tasks: its
 * spouts, bolts and acker take turns), each with its gaps held, so that its address is no other's. */
#define GAPS_SEEN 8
static PyObject *gaps_seen[GAPS_SEEN], *gaps_iter[GAPS_SEEN];  /* held; gaps_iter[i] NULL: not an iterator's */
static int gaps_next_slot;
static PyObject *iterator_of(PyObject *next);

static long long
next_gap(PyObject *gaps)
{
    int i = 0;
    while (i < GAPS_SEEN && gaps_seen[i] != gaps)
        i++;
    if (i == GAPS_SEEN) {
        i = gaps_next_slot;
        gaps_next_slot = (gaps_next_slot + 1) % GAPS_SEEN;
        PyObject *it = iterator_of(gaps);
        Py_XSETREF(gaps_iter[i], it);
        Py_XSETREF(gaps_seen[i], Py_NewRef(gaps));
    }
    PyObject *gap;
    PyObject *it = gaps_iter[i];
    if (it != NULL) {
        Py_INCREF(it);  /* held while it runs: a cached slot may be replaced meanwhile */
        gap = Py_TYPE(it)->tp_iternext(it);
        Py_DECREF(it);
        if (gap == NULL && !PyErr_Occurred())
            PyErr_SetNone(PyExc_StopIteration);  /* as the method-wrapper's __next__() */
    } else {
        gap = PyObject_CallNoArgs(gaps);
    }
    long long left = gap ? PyLong_AsLongLong(gap) : -1;
    Py_XDECREF(gap);
    return left;
}

/* the KeyStats of tup's (component, stream) in sampled: from sampled.by_handle by its Source,
 * else from sampled.key_of(tup) (new reference) */
static PyObject *
sampled_key(PyObject *sampled, PyObject *tup)
{
    if (is_a(tup, &TupleBase_Type, &seen_tuple)) {
        PyObject *by_handle = slot_get(sampled, str_by_handle, &slot_by_handle);
        if (by_handle == NULL)
            return NULL;
        PyObject *ks = PyDict_Check(by_handle) ? PyDict_GetItemWithError(by_handle, ((TupleBase *)tup)->src) : NULL;
        Py_XINCREF(ks);
        Py_DECREF(by_handle);
        if (ks != NULL || PyErr_Occurred())
            return ks;
    }
    return PyObject_CallMethodOneArg(sampled, str_key_of, tup);
}

/* samples[id(tup)] = (tup, start, ks), first forgetting the oldest one when it has max_open */
static int
open_sample(PyObject *sampled, PyObject *tup, PyObject *start, PyObject *ks)
{
    PyObject *samples = PyObject_GetAttr(sampled, str_open_samples);
    if (samples == NULL)
        return -1;
    int rc = -1;
    if (!PyDict_Check(samples)) {
        PyErr_SetString(PyExc_TypeError, "open_samples is not a dict");
        goto done;
    }
    PyObject *max_open = PyObject_GetAttr(sampled, str_max_open);
    Py_ssize_t max = max_open ? PyLong_AsSsize_t(max_open) : -1;
    Py_XDECREF(max_open);
    if (max == -1 && PyErr_Occurred())
        goto done;
    if (PyDict_GET_SIZE(samples) >= max) {
        Py_ssize_t pos = 0;
        PyObject *oldest, *v;
        if (PyDict_Next(samples, &pos, &oldest, &v)) {
            Py_INCREF(oldest);
            int del = PyDict_DelItem(samples, oldest);
            Py_DECREF(oldest);
            if (del < 0)
                goto done;
        }
    }
    PyObject *id = PyLong_FromVoidPtr(tup);
    PyObject *entry = id ? PyTuple_Pack(3, tup, start, ks) : NULL;
    rc = entry ? PyDict_SetItem(samples, id, entry) : -1;
    Py_XDECREF(id);
    Py_XDECREF(entry);
done:
    Py_DECREF(samples);
    return rc;
}

/* one sampled input: timed, its sample opened for its ack to close, and counted in ks (also when
 * execute raises); 0, or -1 with execute's exception */
static int
sampled_execute(PyObject *execute, PyObject *tup, PyObject *sampled, PyObject *now, long long freq,
                PyObject *on_error, unsigned long long *line)
{
    PyObject *ks = sampled_key(sampled, tup);
    if (ks == NULL)
        return -1;
    PyObject *start = call_quick(now, NULL);  /* time.monotonic, called at once */
    int rc = -1;
    if (start == NULL)
        goto done;
    /* a BasicBolt's one-tree input: its sample is closed by its ack inside the call (see
     * BasicExecute); anything else is opened in the dict of open samples for its ack to find */
    BasicExecute *be = NULL;
    if (Py_IS_TYPE(execute, &BasicExecute_Type) && ((BasicExecute *)execute)->sample_tup == NULL &&
            PyFloat_CheckExact(start) && is_a(ks, &KeyStatsBase_Type, &seen_key_stats) &&
            is_a(tup, &TupleBase_Type, &seen_tuple) && PyLong_CheckExact(((TupleBase *)tup)->root)) {
        be = (BasicExecute *)execute;
        be->sample_tup = Py_NewRef(tup);
        be->sample_ks = Py_NewRef(ks);
        be->sample_start = PyFloat_AS_DOUBLE(start);
        be->sample_freq = freq;
    } else if (open_sample(sampled, tup, start, ks) < 0) {
        goto done;
    }
    if (line != NULL)
        __atomic_store_n(line, executing_root(tup), __ATOMIC_RELAXED);
    PyObject *r = PyObject_Vectorcall(execute, &tup, 1, NULL);
    if (line != NULL)
        __atomic_store_n(line, 0ULL, __ATOMIC_RELAXED);
    if (be != NULL) {  /* not acked (it failed or raised): no sample left open, as a fail closes it */
        Py_CLEAR(be->sample_tup);
        Py_CLEAR(be->sample_ks);
    }
    Py_XDECREF(r);
    rc = r == NULL ? on_execute_error(on_error, tup) : 0;
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);  /* the figures are added on an exception too (finally:) */
    PyObject *end = call_quick(now, NULL);
    int added = -1;
    if (end != NULL) {
        double elapsed = PyFloat_AsDouble(end) - PyFloat_AsDouble(start);
        Py_DECREF(end);
        if (PyErr_Occurred()) {
            /* a clock that gives no float: its error */
        } else if (!is_a(ks, &KeyStatsBase_Type, &seen_key_stats)) {
            PyErr_SetString(PyExc_TypeError, "a sampled input's statistics are not a KeyStats");
        } else {
            KeyStatsBase *k = (KeyStatsBase *)ks;
            k->executed += freq;
            k->execute_ms += 1000.0 * elapsed;
            k->execute_n += 1;
            added = 0;
        }
    }
    if (type != NULL) {  /* execute's exception wins over ours */
        if (added < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
    } else if (added < 0) {
        rc = -1;
    }
done:
    Py_XDECREF(start);
    Py_DECREF(ks);
    return rc;
}

static PyObject *
drain_inbox(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 6 || nargs > 9) {
        PyErr_SetString(PyExc_TypeError,
                        "drain_inbox(execute, pop, n, stats, sampled, now, on_error=None, executing=None, budget=None)");
        return NULL;
    }
    PyObject *execute = args[0], *pop = args[1], *stats = args[3], *sampled = args[4], *now = args[5];
    PyObject *on_error = nargs >= 7 && args[6] != Py_None ? args[6] : NULL;
    PyObject *executing = nargs >= 8 ? args[7] : Py_None;
    unsigned long long *line = executing_line(executing);
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    /* the clock is read only for a drain of more than one input: one always runs */
    double deadline = NO_DEADLINE;
    if (nargs == 9 && args[8] != Py_None && n > 1) {
        double budget = PyFloat_AsDouble(args[8]);
        if (budget == -1.0 && PyErr_Occurred())
            return NULL;
        deadline = coarse_now() + (budget > 0.0 ? budget : 0.0);
    }
    PyObject *o = slot_get(sampled, str_left, &slot_left);
    long long left = o ? PyLong_AsLongLong(o) : -1;
    Py_XDECREF(o);
    o = left == -1 && PyErr_Occurred() ? NULL : slot_get(sampled, str_freq, &slot_freq);
    long long freq = o ? PyLong_AsLongLong(o) : -1;
    Py_XDECREF(o);
    PyObject *gaps = freq == -1 && PyErr_Occurred() ? NULL : slot_get(sampled, str_gaps, &slot_gaps);
    if (gaps == NULL)
        return NULL;
    Py_ssize_t ran = 0;
    int failed = 0;
    while (ran < n) {
        Py_ssize_t run = left - 1 < n - ran ? (Py_ssize_t)(left - 1) : n - ran;
        Py_ssize_t done = run_inputs(execute, pop, run, stats, on_error, line, deadline);  /* counted, on a crash too */
        if (done < 0) {
            failed = 1;
            break;
        }
        ran += done;
        left -= done;
        if (done < run)  /* the deadline passed */
            break;
        if (ran < n && run > 0 && past_deadline(deadline))
            break;
        if (ran < n) {
            PyObject *tup = call_quick(pop, NULL);
            if (tup == NULL || sampled_execute(execute, tup, sampled, now, freq, on_error, line) < 0) {
                Py_XDECREF(tup);
                failed = 1;
                break;
            }
            Py_DECREF(tup);
            if (count(stats, &TaskStatsBase_Type, &seen_task_stats, offsetof(TaskStatsBase, executed), str_executed, 1) < 0) {
                failed = 1;
                break;
            }
            ran++;
            left = next_gap(gaps);
            if (left == -1 && PyErr_Occurred()) {
                failed = 1;
                break;
            }
            if (past_deadline(deadline))
                break;
        }
    }
    Py_DECREF(gaps);
    /* sampled.left = left, also on an exception (finally:), which stays the one raised */
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    if (failed)
        PyErr_Fetch(&type, &value, &tb);
    PyObject *l = PyLong_FromLongLong(left);
    int rc = l ? slot_set(sampled, str_left, l, &slot_left) : -1;
    Py_XDECREF(l);
    if (failed) {
        if (rc < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    return rc < 0 ? NULL : PyLong_FromSsize_t(ran);
}

/* ---------------------------------------------------------------------------------------------
 * Non-blocking socket calls that keep the GIL (worker.tcp.TcpTransport). Python's socket and
 * select calls give the GIL up around every system call, and a loop that does so every round
 * takes it straight back each time: CPython's waiting threads see that a switch happened and
 * never ask for it, so the worker's other threads (its heartbeat) starve. These calls cannot
 * block, so they keep it.
 */
static PyObject *
epoll_ready(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "epoll_ready(epoll) takes 1 argument");
        return NULL;
    }
    int epfd = PyObject_AsFileDescriptor(args[0]);
    if (epfd < 0)
        return NULL;
    struct epoll_event events[64];
    int n = epoll_wait(epfd, events, 64, 0);
    if (n < 0) {
        if (errno != EINTR)
            return PyErr_SetFromErrno(PyExc_OSError);
        n = 0;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *pair = Py_BuildValue("(iI)", events[i].data.fd, (unsigned int)events[i].events);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, pair);
    }
    return out;
}

static PyObject *
send_nb(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send_nb(sock, data) takes 2 arguments");
        return NULL;
    }
    int fd = PyObject_AsFileDescriptor(args[0]);
    if (fd < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    ssize_t sent = send(fd, view.buf, (size_t)view.len, MSG_DONTWAIT | MSG_NOSIGNAL);
    int err = errno;
    PyBuffer_Release(&view);
    if (sent < 0) {
        if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
            return PyLong_FromLong(0);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(sent);
}

static PyObject *
recv_nb(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "recv_nb(sock, size) takes 2 arguments");
        return NULL;
    }
    int fd = PyObject_AsFileDescriptor(args[0]);
    if (fd < 0)
        return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "recv_nb: a negative size");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        return NULL;
    ssize_t got = recv(fd, PyBytes_AS_STRING(out), (size_t)size, MSG_DONTWAIT);
    if (got < 0) {
        int err = errno;
        Py_DECREF(out);
        if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
            Py_RETURN_NONE;
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (got != size && _PyBytes_Resize(&out, got) < 0)
        return NULL;
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * StaleWatch(): when a worker's loops last polled the TCP wire (worker.tcp.TcpTransport), and a
 * wait, without the GIL, until that is too long ago. touch() records now (each poll);
 * wait_stale(secs) sleeps until secs have passed since the last touch and returns True, or
 * returns False once close() was called. The transport's watchman thread reads for the loops
 * only when a loop is in a long round; waiting in Python, it took the GIL 200 times a second
 * from a busy loop to find out that it had nothing to do. StaleWatch(fd) also waits, once
 * stale, until fd (the transport's epoll) is readable: a loop whose rounds are longer than
 * the span (W1's on a loaded machine) lost the GIL to a watchman that had nothing to read, every
 * span, each a switch of threads that left the loop waiting for the GIL (py-spy: 8% of one
 * worker's loop in the GIL's waits, with nothing crossing). wait_stale(secs, until) also
 * returns, stale, once the monotonic clock (time.monotonic()) reaches until: the watchman then
 * tends the wire for loops stuck in user code (its reach check, about once a second), which no
 * data arrives to wake it for during a partition.
 */
typedef struct {
    PyObject_HEAD
    _Atomic long long polled_ns;
    _Atomic int closed;
    int fd;  /* -1: stale is enough */
} StaleWatch;

static long long
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static PyObject *
StaleWatch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs > 1 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "StaleWatch(fd=None) takes at most 1 positional argument");
        return NULL;
    }
    int fd = -1;
    if (nargs == 1 && PyTuple_GET_ITEM(args, 0) != Py_None) {
        fd = PyObject_AsFileDescriptor(PyTuple_GET_ITEM(args, 0));
        if (fd < 0)
            return NULL;
    }
    StaleWatch *self = (StaleWatch *)type->tp_alloc(type, 0);
    if (self != NULL) {
        atomic_store(&self->polled_ns, monotonic_ns());
        atomic_store(&self->closed, 0);
        self->fd = fd;
    }
    return (PyObject *)self;
}

static PyObject *
StaleWatch_touch(StaleWatch *self, PyObject *Py_UNUSED(ignored))
{
    atomic_store_explicit(&self->polled_ns, monotonic_ns(), memory_order_relaxed);
    Py_RETURN_NONE;
}

static PyObject *
StaleWatch_close(StaleWatch *self, PyObject *Py_UNUSED(ignored))
{
    atomic_store(&self->closed, 1);
    Py_RETURN_NONE;
}

static PyObject *
StaleWatch_wait_stale(StaleWatch *self, PyObject *args, PyObject *kwds)
{
    /* secs and until by position or by name, as the pure twin (squall._native.StaleWatch) takes
       them: wait_stale(0.005, until=t) raised a TypeError here only */
    static char *kwlist[] = {"secs", "until", NULL};
    PyObject *secs_obj, *until_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:wait_stale", kwlist, &secs_obj, &until_obj))
        return NULL;
    double secs = PyFloat_AsDouble(secs_obj);
    if (secs == -1.0 && PyErr_Occurred())
        return NULL;
    if (!(secs > 0.0 && secs < 3600.0)) {
        PyErr_SetString(PyExc_ValueError, "StaleWatch.wait_stale: secs must be above 0 and below 3600");
        return NULL;
    }
    long long until_ns = LLONG_MAX;  /* None: only something to read ends a stale wait */
    if (until_obj != Py_None) {
        double until = PyFloat_AsDouble(until_obj);
        if (until == -1.0 && PyErr_Occurred())
            return NULL;
        if (until != until) {
            PyErr_SetString(PyExc_ValueError, "StaleWatch.wait_stale: until must be a time, not NaN");
            return NULL;
        }
        /* checked before converting: a double outside long long's range (-inf, -1e300, +inf)
           converted is undefined behaviour in C, not a clamp. Seconds; past ~285 years either
           way: never (until_ns stays LLONG_MAX), or always (already past) */
        if (until <= -9.0e9)
            until_ns = LLONG_MIN;
        else if (until < 9.0e9)
            until_ns = (long long)(until * 1e9);
    }
    long long span = (long long)(secs * 1e9);
    int span_ms = (int)((span + 999999LL) / 1000000LL);
    int stale = 0;
    Py_BEGIN_ALLOW_THREADS
    while (!atomic_load(&self->closed)) {
        long long now = monotonic_ns();
        long long left = atomic_load_explicit(&self->polled_ns, memory_order_relaxed) + span - now;
        if (left > 0) {
            struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
            nanosleep(&ts, NULL);  /* woken early by a signal: the loop looks again */
            continue;
        }
        if (self->fd < 0 || now >= until_ns) {
            stale = 1;
            break;
        }
        /* stale: wait (a span at most, to see a close or a touch) for something to read */
        struct pollfd p = {self->fd, POLLIN, 0};
        int ready = poll(&p, 1, span_ms);
        if (ready != 0 && (ready > 0 || errno != EINTR)
            && atomic_load_explicit(&self->polled_ns, memory_order_relaxed) + span - monotonic_ns() <= 0) {
            stale = 1;  /* readable (or an error, which the caller's read reports) and still stale */
            break;
        }
    }
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(stale && !atomic_load(&self->closed));
}

static PyMethodDef StaleWatch_methods[] = {
    {"touch", (PyCFunction)StaleWatch_touch, METH_NOARGS, "touch(): a loop polls now."},
    {"wait_stale", (PyCFunction)(void (*)(void))StaleWatch_wait_stale, METH_VARARGS | METH_KEYWORDS,
     "wait_stale(secs, until=None): True once secs have passed since the last touch (sleeping without "
     "the GIL until then) and, given fd, fd is readable or time.monotonic() has reached until; False "
     "once closed."},
    {"close", (PyCFunction)StaleWatch_close, METH_NOARGS, "close(): wait_stale returns False."},
    {NULL}
};

static PyTypeObject StaleWatch_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.StaleWatch",
    .tp_basicsize = sizeof(StaleWatch),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StaleWatch(fd=None): when the loops last polled, and a wait without the GIL until that is too "
              "long ago (and, given fd, fd is readable).",
    .tp_new = StaleWatch_new,
    .tp_methods = StaleWatch_methods,
};

#include "_speedups_trident.c"


static PyMethodDef speedups_functions[] = {
    TRIDENT_FUNCTIONS
    {"epoll_ready", (PyCFunction)(void (*)(void))epoll_ready, METH_FASTCALL,
     "epoll_ready(epoll): [(fd, events)] ready now (epoll_wait with timeout 0), keeping the GIL."},
    {"send_nb", (PyCFunction)(void (*)(void))send_nb, METH_FASTCALL,
     "send_nb(sock, data): bytes sent without blocking (0: it would block), keeping the GIL."},
    {"recv_nb", (PyCFunction)(void (*)(void))recv_nb, METH_FASTCALL,
     "recv_nb(sock, size): up to size bytes (b'': the peer closed; None: nothing yet), keeping the GIL."},
    {"acker_run", (PyCFunction)(void (*)(void))acker_run, METH_FASTCALL,
     "acker_run(acker, pop, n, now, deliver): apply n messages from pop() as Acker.update would, "
     "delivering each reply (kind, root, delta_secs) to deliver[spout_task]."},
    {"current_frames", (PyCFunction)current_frames, METH_NOARGS,
     "current_frames(): sys._current_frames() with the garbage collector off, in one step under the GIL."},
    {"own_methods", (PyCFunction)own_methods, METH_O,
     "own_methods(cls): the compiled base's methods set on cls as its own (CPython 3.11 specialises their calls then)."},
    {"send_acks", (PyCFunction)(void (*)(void))send_acks, METH_FASTCALL,
     "send_acks(acks, ackers, kind): send each held ack (root -> xor) to its acker, then clear acks."},
    {"drain_inbox", (PyCFunction)(void (*)(void))drain_inbox, METH_FASTCALL,
     "drain_inbox(execute, pop, n, stats, sampled, now, on_error=None, executing=None, budget=None): a bolt "
     "task's n inputs (fewer once it has run budget seconds), sampled ones timed; the inputs executed."},
    {"deliver_items", (PyCFunction)(void (*)(void))deliver_items, METH_FASTCALL,
     "deliver_items(inboxes, items): append each (task, item) to inboxes[task] if there; the count."},
    {"group_items", (PyCFunction)(void (*)(void))group_items, METH_FASTCALL,
     "group_items(items, tuple_type): the columns of a batch to send, or None for an unknown item."},
    {"pack_batch", (PyCFunction)(void (*)(void))pack_batch, METH_FASTCALL,
     "pack_batch(items, tuple_type): a batch's bytes as msgpack writes them, or None if an item "
     "or value is not plain."},
    {"unpack_into", (PyCFunction)(void (*)(void))unpack_into, METH_FASTCALL,
     "unpack_into(data, source_of, tuple_type, words, inboxes): a batch decoded straight into its inboxes; "
     "the items delivered, or None (nothing delivered: decode it with unpack_batch or msgpack)."},
    {"unpack_batch", (PyCFunction)(void (*)(void))unpack_batch, METH_FASTCALL,
     "unpack_batch(data, source_of, tuple_type, words): a batch of plain values decoded into its "
     "flat items, or None when it is not one."},
    {"batch_items", (PyCFunction)(void (*)(void))batch_items, METH_FASTCALL,
     "batch_items(out, targets, values, src, roots, vals, tuple_type): append a batch run's "
     "(target, Tuple) pairs to out."},
    {"execute_run", (PyCFunction)(void (*)(void))execute_run, METH_FASTCALL,
     "execute_run(execute, pop, n, stats, on_error=None, executing=None): execute(pop()) n times, counting each in "
     "stats.executed as it returns."},
    {"spout_replies", (PyCFunction)(void (*)(void))spout_replies, METH_FASTCALL,
     "spout_replies(executor, pop, n, now, task_sampled=None): n replies from pop() as SpoutExecutor._reply would "
     "(with task_sampled, the task's TaskStatistics, one in a gap sampled)."},
    {"acker_drain", (PyCFunction)(void (*)(void))acker_drain, METH_FASTCALL,
     "acker_drain(acker, pop, n, now, deliver, sampled, key_of): an acker task's n messages, sampled as Storm samples them."},
    {"spout_produce", (PyCFunction)(void (*)(void))spout_produce, METH_FASTCALL,
     "spout_produce(executor, calls, budget, throttle): SpoutExecutor.produce's rounds of next_tuple calls."},
    {NULL}
};

/* --------------------------------------------------------------------------------------------- */
#ifndef SQUALL_SOURCE_SHA256
#define SQUALL_SOURCE_SHA256 "" /* built by hand, not by setup.py: squall._native refuses it as stale */
#endif

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "squall._speedups",
    "The per-tuple hot path of a bolt, in C; squall._native picks it or its pure-Python twin.", -1,
    speedups_functions,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    crc32_init();
    PyObject *empty = PyTuple_New(0), *it = empty ? PyObject_GetIter(empty) : NULL;
    PyObject *wrapper = it ? PyObject_GetAttrString(it, "__next__") : NULL;
    if (wrapper == NULL) {
        Py_XDECREF(it);
        Py_XDECREF(empty);
        return NULL;
    }
    method_wrapper_type = (PyTypeObject *)Py_NewRef((PyObject *)Py_TYPE(wrapper));
    Py_DECREF(wrapper);
    Py_DECREF(it);
    Py_DECREF(empty);
    ZERO = PyLong_FromLong(0);
    ONE = PyLong_FromLong(1);
    MINUS_ONE = PyLong_FromLong(-1);
    DEFAULT_STREAM = PyUnicode_InternFromString("default");
    str_emit = PyUnicode_InternFromString("emit");
    str_send_multi = PyUnicode_InternFromString("_send_multi");
    str_acks = PyUnicode_InternFromString("acks");
    str_acked = PyUnicode_InternFromString("acked");
    str_executed = PyUnicode_InternFromString("executed");
    str_pending = PyUnicode_InternFromString("pending");
    str_buckets = PyUnicode_InternFromString("_buckets");
    str_tree_type = PyUnicode_InternFromString("tree_type");
    str_reply = PyUnicode_InternFromString("_reply");
    str_in_flight = PyUnicode_InternFromString("in_flight");
    str_current_task = PyUnicode_InternFromString("current_task");
    str_objs = PyUnicode_InternFromString("objs");
    str_stats = PyUnicode_InternFromString("stats");
    str_ack = PyUnicode_InternFromString("ack");
    str_latency_sum = PyUnicode_InternFromString("latency_sum");
    str_latency_count = PyUnicode_InternFromString("latency_count");
    str_sampled = PyUnicode_InternFromString("sampled");
    str_emit_general = PyUnicode_InternFromString("_emit_general");
    str_emits = PyUnicode_InternFromString("emits");
    str_newest = PyUnicode_InternFromString("newest");
    str_ack_general = PyUnicode_InternFromString("_ack_general");
    str_task = PyUnicode_InternFromString("task");
    str_append = PyUnicode_InternFromString("append");
    str_extend = PyUnicode_InternFromString("extend");
    str_stream = PyUnicode_InternFromString("stream");
    str_left = PyUnicode_InternFromString("left");
    str_by_handle = PyUnicode_InternFromString("by_handle");
    str_key_of = PyUnicode_InternFromString("key_of");
    str_open_samples = PyUnicode_InternFromString("open_samples");
    str_freq = PyUnicode_InternFromString("freq");
    str_gaps = PyUnicode_InternFromString("gaps");
    str_max_open = PyUnicode_InternFromString("max_open");
    str_close_sample = PyUnicode_InternFromString("close_sample");
    str_max_pending = PyUnicode_InternFromString("max_pending");
    str_throttled = PyUnicode_InternFromString("throttled");
    if (!str_max_pending || !str_throttled)
        return NULL;
    ACK_KIND = PyLong_FromLong(1);
    if (!str_left || !str_by_handle || !str_key_of || !str_open_samples || !str_freq || !str_gaps || !str_max_open || !str_close_sample)
        return NULL;
    if (!ZERO || !ONE || !MINUS_ONE || !DEFAULT_STREAM || !str_emit || !str_send_multi || !str_acks ||
        !str_acked || !str_pending || !str_buckets || !str_tree_type ||
        !str_reply || !str_in_flight || !str_current_task || !str_objs || !str_stats || !str_ack || !str_latency_sum ||
        !str_latency_count || !str_emit_general || !str_emits || !str_newest ||
        !str_ack_general || !ACK_KIND || !str_task || !str_stream || !str_append || !str_extend)
        return NULL;
    PyTypeObject *types[] = {&IdSource_Type, &TupleBase_Type, &RouterBase_Type, &TaskStatsBase_Type, &SpoutExecutorBase_Type, &BasicCollectorBase_Type, &BasicExecute_Type,
                             &PendingTreeBase_Type, &MemoChooser_Type, &Sender_Type, &SpoutCollectorBase_Type,
                             &BoltCollectorBase_Type, &NextChooser_Type, &StaleWatch_Type, &KeyStatsBase_Type, &Outbox_Type,
                             &ExecutingEntry_Type};
    const char *names[] = {"IdSource", "TupleBase", "RouterBase", "TaskStatsBase", "SpoutExecutorBase", "BasicCollectorBase", "BasicExecute", "PendingTreeBase",
                           "MemoChooser", "Sender", "SpoutCollectorBase",
                           "BoltCollectorBase", "NextChooser", "StaleWatch", "KeyStatsBase", "Outbox",
                           "ExecutingEntry"};
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SQUALL_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (trident_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
