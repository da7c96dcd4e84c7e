/* squall._speedups' Trident part: included by squall/_speedups.c (one module), kept apart so that
 * Trident's C and the engine's can be worked on at once. What each name twins is listed at the top
 * of _speedups.c; TRIDENT_FUNCTIONS goes into its method table and trident_init into its init.
 */
/* ---------------------------------------------------------------------------------------------
 * opaque_commit: the per-key commit of a grouped combiner into an opaque MemoryMapState
 * (squall.trident.state.memory._MemoryBacking.commit_opaque; its twin is squall._native's).
 *
 * Why C: py-spy put 29% of W1T's worker time in this loop in Python (a read, Storm's opaque rule,
 * one new OpaqueValue made through its frozen dataclass __init__, two dict writes per key, 2.8
 * keys a sentence). Here an OpaqueValue is made as object.__new__ and object.__setattr__ make it
 * (what the dataclass's __init__ does, without its Python frame), so it is the same object.
 * Every key it does not handle (a key or a stored value kept encoded) is handed back by index.
 */
static PyObject *str_curr_txid, *str_curr, *str_prev, *str_base, *EMPTY_TUPLE;

/* what _MemoryBacking keeps as it is: a key of exact str, bytes and int parts */
static inline int
plain_key(PyObject *k)
{
    if (!PyTuple_CheckExact(k))
        return 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(k); i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(k, i);
        if (!PyUnicode_CheckExact(p) && !PyBytes_CheckExact(p) && !PyLong_CheckExact(p))
            return 0;
    }
    return 1;
}

/* a value that cannot change (squall._native.plain_value): 1, 0, or -1 with an exception set */
static int
plain_value(PyObject *v)
{
    if (v == Py_None || PyLong_CheckExact(v) || PyUnicode_CheckExact(v) || PyFloat_CheckExact(v) ||
        PyBytes_CheckExact(v) || PyBool_Check(v) || PyComplex_CheckExact(v))
        return 1;
    if (!PyTuple_CheckExact(v))
        return 0;
    if (Py_EnterRecursiveCall(" in opaque_commit's check of a stored value"))
        return -1;
    int plain = 1;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(v); i < n && plain == 1; i++)
        plain = plain_value(PyTuple_GET_ITEM(v, i));
    Py_LeaveRecursiveCall();
    return plain;
}

static int
append_index(PyObject *list, Py_ssize_t i)
{
    PyObject *index = PyLong_FromSsize_t(i);
    if (index == NULL)
        return -1;
    int r = PyList_Append(list, index);
    Py_DECREF(index);
    return r;
}

static PyObject *
opaque_commit(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1]) || !PyList_CheckExact(args[2]) ||
        !PyList_CheckExact(args[3]) || !PyType_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "opaque_commit(committed: dict, written: dict, ks: list, args: list, curr_tx, combine, value_type: type)");
        return NULL;
    }
    PyObject *committed = args[0], *written = args[1], *ks = args[2], *vals = args[3], *curr_tx = args[4],
             *combine = args[5];
    PyTypeObject *ov_type = (PyTypeObject *)args[6];
    Py_ssize_t n = PyList_GET_SIZE(ks);
    if (PyList_GET_SIZE(vals) != n) {
        PyErr_Format(PyExc_ValueError, "%zd keys and %zd partial aggregates: one per key is needed", n,
                     PyList_GET_SIZE(vals));
        return NULL;
    }
    PyObject *ret = PyList_New(n), *left = PyList_New(0), *encode = PyList_New(0);
    PyObject *stx = NULL, *scurr = NULL, *sprev = NULL, *k = NULL, *arg = NULL, *new = NULL, *ov = NULL;
    if (ret == NULL || left == NULL || encode == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(ret, i, Py_NewRef(Py_None));
    }
    /* as far as both lists still reach, as the twin's zip goes: combine (Python) may shorten them
     * (read at their first length, a cleared list was read past its end: a crash) */
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(ks) && i < PyList_GET_SIZE(vals); i++) {
        /* references of their own: combine (Python) may change the lists and dicts */
        k = Py_NewRef(PyList_GET_ITEM(ks, i));
        arg = Py_NewRef(PyList_GET_ITEM(vals, i));
        PyObject *prev = Py_None;
        if (!plain_key(k))
            goto hand_back;
        PyObject *stored = PyDict_GetItemWithError(written, k);
        int cached = stored != NULL;
        if (stored == NULL) {
            if (PyErr_Occurred())
                goto fail;
            stored = PyDict_GetItemWithError(committed, k);
            if (stored == NULL && PyErr_Occurred())
                goto fail;
        }
        if (stored == NULL) {
            new = Py_NewRef(arg);
        }
        else {
            if (Py_TYPE(stored) != ov_type)  /* kept encoded: the Python path decodes it */
                goto hand_back;
            Py_INCREF(stored);
            stx = PyObject_GetAttr(stored, str_curr_txid);
            scurr = stx ? PyObject_GetAttr(stored, str_curr) : NULL;
            sprev = scurr ? PyObject_GetAttr(stored, str_prev) : NULL;
            if (sprev == NULL) {
                Py_DECREF(stored);
                goto fail;
            }
            /* OpaqueValue.for_batch (the rule's home), in C: what this batch builds on and keeps as prev */
            int older = curr_tx == Py_None || stx == Py_None;
            if (!older && (older = PyObject_RichCompareBool(stx, curr_tx, Py_LT)) < 0) {
                Py_DECREF(stored);
                goto fail;
            }
            if (older) {
                prev = scurr;
            }
            else {
                int same = PyObject_RichCompareBool(stx, curr_tx, Py_EQ);
                if (same <= 0) {  /* the state is ahead of this batch: _base raises its error */
                    if (same == 0) {
                        PyObject *r = PyObject_CallMethodOneArg(stored, str_base, curr_tx);
                        if (r != NULL) {
                            Py_DECREF(r);
                            PyErr_SetString(PyExc_RuntimeError, "opaque_commit: a stored value ahead of the batch");
                        }
                    }
                    Py_DECREF(stored);
                    goto fail;
                }
                prev = sprev;
            }
            Py_DECREF(stored);
            PyObject *base = cached ? scurr : prev;
            if (base == Py_None)
                new = Py_NewRef(arg);
            else if (combine == Py_None)
                new = PyNumber_Add(base, arg);
            else
                new = PyObject_CallFunctionObjArgs(combine, base, arg, NULL);
            if (new == NULL)
                goto fail;
        }
        ov = PyBaseObject_Type.tp_new(ov_type, EMPTY_TUPLE, NULL);
        if (ov == NULL || PyObject_GenericSetAttr(ov, str_curr_txid, curr_tx) < 0 ||
            PyObject_GenericSetAttr(ov, str_curr, new) < 0 || PyObject_GenericSetAttr(ov, str_prev, prev) < 0)
            goto fail;
        if (PyDict_SetItem(written, k, ov) < 0)
            goto fail;
        int plain = plain_value(new);
        if (plain == 1)
            plain = plain_value(prev);
        if (plain < 0)
            goto fail;
        if ((plain ? PyDict_SetItem(committed, k, ov) : append_index(encode, i)) < 0)
            goto fail;
        PyObject *none = PyList_GET_ITEM(ret, i);
        PyList_SET_ITEM(ret, i, new);  /* new's reference moves into ret */
        Py_DECREF(none);
        new = NULL;
        goto next;
    hand_back:
        if (append_index(left, i) < 0)
            goto fail;
    next:
        Py_CLEAR(ov);
        Py_CLEAR(stx);
        Py_CLEAR(scurr);
        Py_CLEAR(sprev);
        Py_CLEAR(k);
        Py_CLEAR(arg);
    }
    return Py_BuildValue("(NNN)", ret, left, encode);
fail:
    Py_XDECREF(ov);
    Py_XDECREF(new);
    Py_XDECREF(stx);
    Py_XDECREF(scurr);
    Py_XDECREF(sprev);
    Py_XDECREF(k);
    Py_XDECREF(arg);
    Py_XDECREF(ret);
    Py_XDECREF(left);
    Py_XDECREF(encode);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * CountingEmit(index, general): the emit of a Trident function whose every emit is counted by a
 * fused grouped Count (squall.trident.processors._CountingCollector): one emit adds one to its
 * group's count in ``groups`` (the group value at ``index`` of the emitted values, or of
 * ``input`` when ``index`` < 0), without a Python frame. Anything else (another length than
 * ``nvalues``, an iterable that is not a list or tuple, an unhashable group) goes to ``general``,
 * the Python emit, which counts it or raises its error.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *groups;
    PyObject *input;
    PyObject *general;
    Py_ssize_t index;
    Py_ssize_t nvalues;
} CountingEmit;

static int
CountingEmit_traverse(CountingEmit *self, visitproc visit, void *arg)
{
    Py_VISIT(self->groups);
    Py_VISIT(self->input);
    Py_VISIT(self->general);
    return 0;
}

static int
CountingEmit_clear(CountingEmit *self)
{
    Py_CLEAR(self->groups);
    Py_CLEAR(self->input);
    Py_CLEAR(self->general);
    return 0;
}

static void
CountingEmit_dealloc(CountingEmit *self)
{
    PyObject_GC_UnTrack(self);
    CountingEmit_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
CountingEmit_call(CountingEmit *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "emit(values) takes one argument");
        return NULL;
    }
    PyObject *values = args[0], *v = NULL, *groups = self->groups, *input = self->input;
    if ((PyList_CheckExact(values) || PyTuple_CheckExact(values)) && Py_SIZE(values) == self->nvalues &&
        groups != NULL && PyDict_CheckExact(groups)) {
        Py_ssize_t i = self->index;
        if (i >= 0) {
            if (i < Py_SIZE(values))
                v = PySequence_Fast_GET_ITEM(values, i);
        }
        else if (input != NULL && PyList_CheckExact(input) && -i <= PyList_GET_SIZE(input)) {
            v = PyList_GET_ITEM(input, PyList_GET_SIZE(input) + i);
        }
    }
    if (v != NULL) {
        PyObject *group = PyTuple_Pack(1, v);
        if (group == NULL)
            return NULL;
        Py_INCREF(groups);  /* a value's __eq__ (Python) may replace self->groups */
        PyObject *old = PyDict_GetItemWithError(groups, group);
        if (old == NULL && PyErr_Occurred()) {  /* unhashable: the general path raises its error */
            PyErr_Clear();
            Py_DECREF(group);
            Py_DECREF(groups);
            return PyObject_CallOneArg(self->general, values);
        }
        PyObject *n = old == NULL ? Py_NewRef(ONE) : PyNumber_Add(old, ONE);
        int r = n == NULL ? -1 : PyDict_SetItem(groups, group, n);
        Py_XDECREF(n);
        Py_DECREF(group);
        Py_DECREF(groups);
        if (r < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return PyObject_CallOneArg(self->general, values);
}

static PyObject *
CountingEmit_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Py_ssize_t index;
    PyObject *general;
    if (!PyArg_ParseTuple(args, "nO:CountingEmit", &index, &general))
        return NULL;
    CountingEmit *self = (CountingEmit *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)CountingEmit_call;
    self->index = index;
    self->nvalues = -1;
    self->general = Py_NewRef(general);
    self->groups = PyDict_New();
    self->input = PyList_New(0);
    if (self->groups == NULL || self->input == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyMemberDef CountingEmit_members[] = {
    {"groups", T_OBJECT_EX, offsetof(CountingEmit, groups), 0, "The batch's counts: {(group value,): count}."},
    {"input", T_OBJECT_EX, offsetof(CountingEmit, input), 0, "The values of the tuple the function is executing."},
    {"general", T_OBJECT_EX, offsetof(CountingEmit, general), 0, "The Python emit, for every other case."},
    {"index", T_PYSSIZET, offsetof(CountingEmit, index), 0, "The group value's index (< 0: in input)."},
    {"nvalues", T_PYSSIZET, offsetof(CountingEmit, nvalues), 0, "The number of values an emit takes."},
    {NULL}
};

static PyTypeObject CountingEmit_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.CountingEmit",
    .tp_basicsize = sizeof(CountingEmit),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "CountingEmit(index, general): emit(values) adds one to its group's count in groups.",
    .tp_vectorcall_offset = offsetof(CountingEmit, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = CountingEmit_new,
    .tp_members = CountingEmit_members,
    .tp_traverse = (traverseproc)CountingEmit_traverse,
    .tp_clear = (inquiry)CountingEmit_clear,
    .tp_dealloc = (destructor)CountingEmit_dealloc,
};

/* ---------------------------------------------------------------------------------------------
 * pack_rows(rows, attempt, choose, nfields, packs, stream, counts): the rows a Trident bolt emits
 * on a packed stream, each into the pack of every task the stream's grouping chooses for
 * [attempt, *row] (squall.trident.executor._Output.emit_many; its twin is squall._native's):
 * packs[(stream, task)] gets the row appended, counts[task] one more. Stops at the first row whose
 * length is not nfields. Returns (rows packed, tuples transferred).
 */
static PyObject *
pack_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyList_CheckExact(args[0]) || !PyDict_CheckExact(args[4]) || !PyDict_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "pack_rows(rows: list, attempt, choose, nfields: int, packs: dict, stream, counts: dict)");
        return NULL;
    }
    PyObject *rows = args[0], *attempt = args[1], *choose = args[2], *packs = args[4], *stream = args[5],
             *counts = args[6];
    Py_ssize_t nfields = PyLong_AsSsize_t(args[3]);
    if (nfields == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t i = 0, transferred = 0;
    for (; i < PyList_GET_SIZE(rows); i++) {
        /* held before its len() (a row's __len__, or the grouping's choose, may change rows:
         * read after them, it was freed under the call) */
        PyObject *values = Py_NewRef(PyList_GET_ITEM(rows, i));
        Py_ssize_t size = PyObject_Size(values);
        if (size != nfields) {
            Py_DECREF(values);
            if (size < 0)
                return NULL;
            break;
        }
        PyObject *full = PyList_New(nfields + 1);
        if (full == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        PyList_SET_ITEM(full, 0, Py_NewRef(attempt));
        for (Py_ssize_t j = 0; j < nfields; j++) {
            PyObject *v = PySequence_GetItem(values, j);
            if (v == NULL) {
                Py_DECREF(full);
                Py_DECREF(values);
                return NULL;
            }
            PyList_SET_ITEM(full, j + 1, v);
        }
        PyObject *tasks = PyObject_CallOneArg(choose, full);
        Py_DECREF(full);
        PyObject *seq = tasks == NULL ? NULL : PySequence_Fast(tasks, "a grouping chose no sequence of tasks");
        Py_XDECREF(tasks);
        if (seq == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        transferred += PySequence_Fast_GET_SIZE(seq);
        /* the tasks may be a list the grouping keeps, which a task's __eq__ or __hash__ (Python,
         * in the dict look-ups) may change: its length read at each, each task held */
        for (Py_ssize_t t = 0; t < PySequence_Fast_GET_SIZE(seq); t++) {
            PyObject *task = PySequence_Fast_GET_ITEM(seq, t);
            PyObject *key = PyTuple_Pack(2, stream, task);
            if (key == NULL)
                goto fail_row;
            Py_INCREF(task);
            PyObject *pack = PyDict_GetItemWithError(packs, key);
            int r;
            if (pack != NULL) {
                r = PyList_Append(pack, values);
            }
            else if (PyErr_Occurred()) {
                r = -1;
            }
            else {
                PyObject *fresh = PyList_New(1);
                if (fresh != NULL)
                    PyList_SET_ITEM(fresh, 0, Py_NewRef(values));
                r = fresh == NULL ? -1 : PyDict_SetItem(packs, key, fresh);
                Py_XDECREF(fresh);
            }
            Py_DECREF(key);
            PyObject *old = r < 0 ? NULL : PyDict_GetItemWithError(counts, task);
            if (old == NULL && PyErr_Occurred())
                r = -1;
            else if (r == 0) {
                PyObject *n = old == NULL ? Py_NewRef(ONE) : PyNumber_Add(old, ONE);
                r = n == NULL ? -1 : PyDict_SetItem(counts, task, n);
                Py_XDECREF(n);
            }
            Py_DECREF(task);
            if (r < 0)
                goto fail_row;
        }
        Py_DECREF(seq);
        Py_DECREF(values);
        continue;
    fail_row:
        Py_DECREF(seq);
        Py_DECREF(values);
        return NULL;
    }
    /* all done (not a break): the rows' length now, as the twin's len(rows) */
    return Py_BuildValue("(nn)", i < PyList_GET_SIZE(rows) ? i : PyList_GET_SIZE(rows), transferred);
}

/* ---------------------------------------------------------------------------------------------
 * TridentTupleBase: the slots of squall.trident.TridentTuple (values, _fields) and its t[i] and
 * len(t) in C, which every Trident operation calls per tuple; view_of(type, fields, values) makes
 * one of a subtype without its __init__ (the bolt's views, whose width is right by construction).
 */
typedef struct {
    PyObject_HEAD
    PyObject *values;
    PyObject *fields;
} TridentTupleBase;

static PyTypeObject TridentTupleBase_Type;
static PyObject *str_index;

static int
TridentTupleBase_traverse(TridentTupleBase *self, visitproc visit, void *arg)
{
    Py_VISIT(self->values);
    Py_VISIT(self->fields);
    return 0;
}

static int
TridentTupleBase_clear(TridentTupleBase *self)
{
    Py_CLEAR(self->values);
    Py_CLEAR(self->fields);
    return 0;
}

static void
TridentTupleBase_dealloc(TridentTupleBase *self)
{
    PyObject_GC_UnTrack(self);
    TridentTupleBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
TridentTupleBase_values(TridentTupleBase *self)
{
    if (self->values == NULL)
        PyErr_SetString(PyExc_AttributeError, "'TridentTuple' object has no attribute 'values'");
    return self->values;
}

static PyObject *
TridentTupleBase_subscript(TridentTupleBase *self, PyObject *key)
{
    PyObject *values = TridentTupleBase_values(self);
    if (values == NULL)
        return NULL;
    if (!PyUnicode_Check(key))
        return PyObject_GetItem(values, key);
    if (self->fields == NULL) {
        PyErr_SetString(PyExc_AttributeError, "'TridentTuple' object has no attribute '_fields'");
        return NULL;
    }
    Py_INCREF(values);
    PyObject *index = PyObject_CallMethodOneArg(self->fields, str_index, key);
    PyObject *r = index == NULL ? NULL : PyObject_GetItem(values, index);
    Py_XDECREF(index);
    Py_DECREF(values);
    return r;
}

static Py_ssize_t
TridentTupleBase_length(TridentTupleBase *self)
{
    PyObject *values = TridentTupleBase_values(self);
    return values == NULL ? -1 : PyObject_Size(values);
}

static PyMappingMethods TridentTupleBase_mapping = {
    .mp_length = (lenfunc)TridentTupleBase_length,
    .mp_subscript = (binaryfunc)TridentTupleBase_subscript,
};

static PyMemberDef TridentTupleBase_members[] = {
    {"values", T_OBJECT_EX, offsetof(TridentTupleBase, values), 0, "The values."},
    {"_fields", T_OBJECT_EX, offsetof(TridentTupleBase, fields), 0, NULL},
    {NULL}
};

static PyTypeObject TridentTupleBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "squall._speedups.TridentTupleBase",
    .tp_doc = "The slots of squall.trident.TridentTuple, t[i] and len(t) (see squall.trident.tuple).",
    .tp_basicsize = sizeof(TridentTupleBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)TridentTupleBase_traverse,
    .tp_clear = (inquiry)TridentTupleBase_clear,
    .tp_dealloc = (destructor)TridentTupleBase_dealloc,
    .tp_members = TridentTupleBase_members,
    .tp_as_mapping = &TridentTupleBase_mapping,
};

static PyObject *
view_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyType_Check(args[0]) ||
        !PyType_IsSubtype((PyTypeObject *)args[0], &TridentTupleBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "view_of(type: a TridentTupleBase subtype, fields, values)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    TridentTupleBase *self = (TridentTupleBase *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->fields = Py_NewRef(args[1]);
    self->values = Py_NewRef(args[2]);
    return (PyObject *)self;
}

/* ---------------------------------------------------------------------------------------------
 * combine_rows(rows, groups, width, group_index, value_index, combine): a grouped combiner's
 * persist taking a pack's rows (squall.trident.processors._grouped_combine with first_as_is, one
 * group field; its twin is squall._native's): groups[(row[group_index],)] becomes row[value_index]
 * for a new group, else combine(old, value) (old + value when combine is None: the built-in
 * Count's). Stops at the first row that is not a list or tuple of width values or whose group
 * cannot be hashed, for the caller's Python path to take on from there (and raise its error).
 * Returns the rows done.
 */
static PyObject *
combine_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "combine_rows(rows, groups: dict, width, group_index, value_index, combine)");
        return NULL;
    }
    PyObject *groups = args[1], *combine = args[5];
    Py_ssize_t width = PyLong_AsSsize_t(args[2]), gi = PyLong_AsSsize_t(args[3]), vi = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred())
        return NULL;
    if (gi < 0 || vi < 0 || gi >= width || vi >= width) {
        PyErr_SetString(PyExc_ValueError, "combine_rows: the group and value indices must be within the width");
        return NULL;
    }
    PyObject *rows = PySequence_Fast(args[0], "combine_rows: rows is not a sequence");
    if (rows == NULL)
        return NULL;
    Py_INCREF(groups);
    Py_ssize_t i = 0;
    /* rows' length read at each row: combine, a value's __add__ or a group's __eq__ (Python) may
     * shorten a list of rows (read at its first length, past its end: a crash) */
    for (; i < PySequence_Fast_GET_SIZE(rows); i++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, i);
        if (!(PyList_CheckExact(row) || PyTuple_CheckExact(row)) || Py_SIZE(row) != width)
            break;
        PyObject *group = PyTuple_Pack(1, PySequence_Fast_GET_ITEM(row, gi));
        PyObject *value = Py_NewRef(PySequence_Fast_GET_ITEM(row, vi));
        if (group == NULL) {
            Py_DECREF(value);
            goto fail;
        }
        PyObject *old = PyDict_GetItemWithError(groups, group);
        if (old == NULL && PyErr_Occurred()) {  /* unhashable: the Python path raises its error */
            PyErr_Clear();
            Py_DECREF(group);
            Py_DECREF(value);
            break;
        }
        PyObject *new;
        Py_XINCREF(old);  /* borrowed from groups, which combine (Python) may change */
        if (old == NULL)
            new = Py_NewRef(value);
        else if (combine == Py_None)
            new = PyNumber_Add(old, value);
        else
            new = PyObject_CallFunctionObjArgs(combine, old, value, NULL);
        Py_XDECREF(old);
        int r = new == NULL ? -1 : PyDict_SetItem(groups, group, new);
        Py_XDECREF(new);
        Py_DECREF(group);
        Py_DECREF(value);
        if (r < 0)
            goto fail;
    }
    if (i > PySequence_Fast_GET_SIZE(rows))  /* all done, the rows shortened: their length now, as the twin's len(rows) */
        i = PySequence_Fast_GET_SIZE(rows);
    Py_DECREF(groups);
    Py_DECREF(rows);
    return PyLong_FromSsize_t(i);
fail:
    Py_DECREF(groups);
    Py_DECREF(rows);
    return NULL;
}

/* The module's methods from this file, spliced into _speedups.c's speedups_functions. */
#define TRIDENT_FUNCTIONS \
    {"combine_rows", (PyCFunction)(void (*)(void))combine_rows, METH_FASTCALL, \
     "combine_rows(rows, groups, width, group_index, value_index, combine): a pack's rows combined into " \
     "groups per group value; the rows done."}, \
    {"view_of", (PyCFunction)(void (*)(void))view_of, METH_FASTCALL, \
     "view_of(type, fields, values): a TridentTupleBase subtype's instance holding them, without its __init__."}, \
    {"pack_rows", (PyCFunction)(void (*)(void))pack_rows, METH_FASTCALL, \
     "pack_rows(rows, attempt, choose, nfields, packs, stream, counts): each row into the packs of " \
     "the tasks choose([attempt, *row]) names: (rows packed, tuples transferred)."}, \
    {"opaque_commit", (PyCFunction)(void (*)(void))opaque_commit, METH_FASTCALL, \
     "opaque_commit(committed, written, ks, args, curr_tx, combine, value_type): a grouped combiner's " \
     "commit into an opaque memory map: (new values, indices handed back, indices to encode)."},

/* Interns this file's names and adds its types to the module m: 0, or -1 with an exception set. */
static int
trident_init(PyObject *m)
{
    str_curr_txid = PyUnicode_InternFromString("curr_txid");
    str_curr = PyUnicode_InternFromString("curr");
    str_prev = PyUnicode_InternFromString("prev");
    str_index = PyUnicode_InternFromString("index");
    str_base = PyUnicode_InternFromString("_base");
    EMPTY_TUPLE = PyTuple_New(0);
    if (!str_curr_txid || !str_curr || !str_prev || !str_index || !str_base || !EMPTY_TUPLE)
        return -1;
    PyTypeObject *types[] = {&CountingEmit_Type, &TridentTupleBase_Type};
    const char *names[] = {"CountingEmit", "TridentTupleBase"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            return -1;
    }
    return 0;
}
