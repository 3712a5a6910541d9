/* The simulator's event engine in C: pcitrace.sim.model.Engine, the same schedule.
 *
 * Why C: a 10 M-clock simulation resumes the model's generators some 700 000 times and pushes
 * and pops some 500 000 heap entries. In Python the loop itself (tuple entries, heapq calls,
 * the command dispatch, the inlined bus grant) was about a third of the model's time; the
 * generators - the model proper - stay Python. Everything here mirrors Engine.run line for line,
 * ties included: the Python class is the reference, and tests/sim/test_engine.py runs random
 * command scripts and whole simulations through both and compares every transaction and the
 * order in which the generators ran.
 *
 * Heap entries are ordered by (time, sequence number); the sequence numbers are unique, so the
 * order is total and a binary heap of plain structs pops exactly what heapq pops from the
 * Python engine's tuples. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    long long t;
    long long seq;
    long long gap;      /* hasgap: a "rowgap" transaction's end; this sleep comes first */
    PyObject *gen;      /* owned */
    PyObject *value;    /* owned */
    int hasgap;
} Ev;

typedef struct {
    PyObject_HEAD
    long long now;
    long long seq;
    long long until;
    Ev *heap;
    Py_ssize_t n, cap;
} EngineObject;

static PyObject *s_period, *s_phase, *s_free, *s_limit, *s_starts, *s_reqs, *s_flat, *s_append,
    *s_extend, *s_items, *s_waiters, *s_popleft, *s_grant_txn;
static PyObject *s_row, *s_rowgap, *s_txn, *s_sleep, *s_until, *s_get;

static const long long NEVER = 1LL << 62;   /* model.NEVER: a time no process reaches */

/* Times are C long longs; the Python engine's are unbounded ints. A time past LLONG_MAX (a sleep
 * of 1e13 us, which the scenario allows, or one that ends past it) is kept as LLONG_MAX, and
 * run() takes horizons below it only: such entries never come due, as in the Python engine (only
 * pending() shows them clamped). Wrapping round instead would resume them in the past. */
static const long long TIME_MAX = LLONG_MAX;

/* -- the heap --------------------------------------------------------------------------- */

static inline int ev_less(const Ev *a, const Ev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/* Takes the references to gen and value. */
static int heap_push(EngineObject *e, long long t, PyObject *gen, PyObject *value, int hasgap, long long gap)
{
    if (e->n == e->cap) {
        Py_ssize_t cap = e->cap ? 2 * e->cap : 64;
        Ev *h = PyMem_Realloc(e->heap, (size_t)cap * sizeof(Ev));
        if (h == NULL) {
            Py_DECREF(gen);
            Py_DECREF(value);
            PyErr_NoMemory();
            return -1;
        }
        e->heap = h;
        e->cap = cap;
    }
    e->seq += 1;
    Ev ev = {t, e->seq, gap, gen, value, hasgap};
    Py_ssize_t i = e->n++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) >> 1;
        if (!ev_less(&ev, &e->heap[parent]))
            break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = ev;
    return 0;
}

/* The least entry, its references passed to the caller. The heap must not be empty. */
static Ev heap_pop(EngineObject *e)
{
    Ev top = e->heap[0];
    Ev last = e->heap[--e->n];
    Py_ssize_t n = e->n, i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_less(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!ev_less(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n > 0)
        e->heap[i] = last;
    return top;
}

/* -- helpers ---------------------------------------------------------------------------- */

/* int(obj) as a C long long (what the Python engine's int() calls do); beyond its range an
 * OverflowError, or with saturate the nearest end of the range (times: see TIME_MAX).
 * -1 with an error set */
static int to_ll(PyObject *obj, long long *out, int saturate)
{
    PyObject *i = PyNumber_Long(obj);
    if (i == NULL)
        return -1;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (overflow) {
        if (!saturate) {
            PyErr_SetString(PyExc_OverflowError, "Python int too large to convert to C long long");
            return -1;
        }
        *out = overflow > 0 ? LLONG_MAX : LLONG_MIN;
    }
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int as_ll(PyObject *obj, long long *out)
{
    return to_ll(obj, out, 0);
}

static int as_time(PyObject *obj, long long *out)
{
    return to_ll(obj, out, 1);
}

static inline long long add_time(long long a, long long b)
{
    long long r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? LLONG_MAX : LLONG_MIN;
    return r;
}

static int range_error(void)
{
    PyErr_SetString(PyExc_OverflowError, "bus time out of the compiled engine's range (C long long)");
    return -1;
}

static int attr_ll(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int r = as_ll(v, out);
    Py_DECREF(v);
    return r;
}

static int set_attr_ll(PyObject *obj, PyObject *name, long long v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    int r = PyObject_SetAttr(obj, name, o);
    Py_DECREF(o);
    return r;
}

static int call_append(PyObject *seq, PyObject *item)
{
    if (PyList_CheckExact(seq))
        return PyList_Append(seq, item);
    PyObject *r = PyObject_CallMethodOneArg(seq, s_append, item);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int append_ll(PyObject *seq, long long v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    int r = call_append(seq, o);
    Py_DECREF(o);
    return r;
}

static inline long long floordiv(long long a, long long b)
{
    long long q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}

static int op_is(PyObject *op, PyObject *name)
{
    if (op == name)
        return 1;
    if (!PyUnicode_Check(op))
        return 0;
    return PyUnicode_Compare(op, name) == 0;
}

/* -- the type --------------------------------------------------------------------------- */

static int Engine_traverse(EngineObject *self, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < self->n; i++) {
        Py_VISIT(self->heap[i].gen);
        Py_VISIT(self->heap[i].value);
    }
    return 0;
}

static int Engine_clear(EngineObject *self)
{
    Ev *heap = self->heap;
    Py_ssize_t n = self->n;
    self->heap = NULL;
    self->n = self->cap = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(heap[i].gen);
        Py_DECREF(heap[i].value);
    }
    PyMem_Free(heap);
    return 0;
}

static void Engine_dealloc(EngineObject *self)
{
    PyObject_GC_UnTrack(self);
    Engine_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Engine_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Engine() takes no arguments");
        return NULL;
    }
    EngineObject *self = (EngineObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->now = 0;
    self->seq = 0;
    self->until = -1;
    self->heap = NULL;
    self->n = self->cap = 0;
    return (PyObject *)self;
}

static PyObject *Engine_at(EngineObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"t", "gen", "value", NULL};
    PyObject *t_obj, *gen, *value = Py_None;
    long long t;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O:at", kwlist, &t_obj, &gen, &value))
        return NULL;
    if (as_time(t_obj, &t) < 0)
        return NULL;
    Py_INCREF(gen);
    Py_INCREF(value);
    if (heap_push(self, t, gen, value, 0, 0) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Engine_spawn(EngineObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"gen", "t", NULL};
    PyObject *gen, *t_obj = Py_None;
    long long t = self->now;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:spawn", kwlist, &gen, &t_obj))
        return NULL;
    if (t_obj != Py_None && as_time(t_obj, &t) < 0)
        return NULL;
    Py_INCREF(gen);
    Py_INCREF(Py_None);
    if (heap_push(self, t, gen, Py_None, 0, 0) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* put(q, item): to the first waiter (resumed now, after what is already due now), else queued */
static int put(EngineObject *self, PyObject *q, PyObject *item)
{
    PyObject *waiters = PyObject_GetAttr(q, s_waiters);
    if (waiters == NULL)
        return -1;
    int any = PyObject_IsTrue(waiters);
    if (any < 0) {
        Py_DECREF(waiters);
        return -1;
    }
    if (any) {
        PyObject *w = PyObject_CallMethodNoArgs(waiters, s_popleft);
        Py_DECREF(waiters);
        if (w == NULL)
            return -1;
        Py_INCREF(item);
        return heap_push(self, self->now, w, item, 0, 0);
    }
    Py_DECREF(waiters);
    PyObject *items = PyObject_GetAttr(q, s_items);
    if (items == NULL)
        return -1;
    int r = call_append(items, item);
    Py_DECREF(items);
    return r;
}

static PyObject *Engine_put(EngineObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "put(q, item) takes two arguments");
        return NULL;
    }
    if (put(self, args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *item_of(PyObject *cmd, Py_ssize_t i)
{
    /* a new reference to cmd[i] */
    if (PyTuple_CheckExact(cmd)) {
        if (i >= PyTuple_GET_SIZE(cmd)) {
            PyErr_SetString(PyExc_IndexError, "tuple index out of range");
            return NULL;
        }
        PyObject *x = PyTuple_GET_ITEM(cmd, i);
        Py_INCREF(x);
        return x;
    }
    return PySequence_GetItem(cmd, i);
}

/* BusModel.grant for the row of a "row" / "rowgap" command, as Engine.run inlines it: the time
 * the transaction ends (NEVER when it does not fit) and, in *index, its index in the bus's rows. */
static int grant_row(PyObject *bus, PyObject *row, long long now, long long *t_end, Py_ssize_t *index)
{
    long long period, phase, free_, limit, clocks;
    if (attr_ll(bus, s_period, &period) < 0 || attr_ll(bus, s_phase, &phase) < 0
        || attr_ll(bus, s_free, &free_) < 0)
        return -1;
    if (period == 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "integer division or modulo by zero");
        return -1;
    }
    long long diff, req;
    if (__builtin_sub_overflow(phase, now, &diff) || (diff == LLONG_MIN && period == -1))
        return range_error();
    req = floordiv(diff, period);
    req = req == LLONG_MIN ? LLONG_MAX : -req;     /* (clamped below anyway when negative) */
    if (req < 0)
        req = 0;
    long long start;
    if (__builtin_add_overflow(req, 2, &start))     /* REQ# -> GNT# -> address phase */
        return range_error();
    if (start < free_)
        start = free_;
    PyObject *proto = item_of(row, 0);
    if (proto == NULL)
        return -1;
    PyObject *c = item_of(proto, 1);
    Py_DECREF(proto);
    if (c == NULL)
        return -1;
    int r = as_ll(c, &clocks);
    Py_DECREF(c);
    if (r < 0)
        return -1;
    long long end, t, limit1;
    if (__builtin_add_overflow(start, clocks, &end))
        return range_error();
    PyObject *starts = PyObject_GetAttr(bus, s_starts);
    if (starts == NULL)
        return -1;
    Py_ssize_t len = PyObject_Size(starts);
    if (len < 0 || attr_ll(bus, s_limit, &limit) < 0) {
        Py_DECREF(starts);
        return -1;
    }
    *index = len;
    if (end > limit) {
        Py_DECREF(starts);
        *t_end = NEVER;
        if (__builtin_add_overflow(limit, 1, &limit1))
            return range_error();
        return set_attr_ll(bus, s_free, free_ > limit1 ? free_ : limit1);
    }
    long long end1;
    if (__builtin_add_overflow(end, 1, &end1) || __builtin_mul_overflow(end, period, &t)
        || __builtin_add_overflow(phase, t, &t)) {
        Py_DECREF(starts);
        return range_error();
    }
    if (set_attr_ll(bus, s_free, end1) < 0 || append_ll(starts, start) < 0) {
        Py_DECREF(starts);
        return -1;
    }
    Py_DECREF(starts);
    PyObject *reqs = PyObject_GetAttr(bus, s_reqs);
    if (reqs == NULL)
        return -1;
    r = append_ll(reqs, req);
    Py_DECREF(reqs);
    if (r < 0)
        return -1;
    PyObject *flat = PyObject_GetAttr(bus, s_flat);
    if (flat == NULL)
        return -1;
    if (PyList_CheckExact(flat)) {
        Py_ssize_t n = PyList_GET_SIZE(flat);
        r = PyList_SetSlice(flat, n, n, row);       /* flat.extend(row) */
    } else {
        /* (not PyObject_CallMethod with "O": that passes a tuple row as the arguments) */
        PyObject *x = PyObject_CallMethodOneArg(flat, s_extend, row);
        r = x == NULL ? -1 : 0;
        Py_XDECREF(x);
    }
    Py_DECREF(flat);
    if (r < 0)
        return -1;
    *t_end = t;
    return 0;
}

/* Resumes gen (owned) with value (owned) at self->now, and goes on resuming it while nothing
 * else is due first; leaves it parked (heap, a queue's waiters) or finished. 0, or -1 with an
 * error set (the generator dropped, as the Python engine drops it). */
static int resume(EngineObject *self, PyObject *gen, PyObject *value, long long until)
{
    /* until is run()'s own, not self->until: a run() called from inside a generator sets that
     * to -1 when it returns, and the Python engine's outer run goes on with its local until */
    long long now = self->now;
    for (;;) {
        PyObject *cmd;
        PySendResult res = PyIter_Send(gen, value, &cmd);
        Py_DECREF(value);
        value = NULL;
        if (res == PYGEN_RETURN) {
            Py_DECREF(cmd);
            Py_DECREF(gen);
            return 0;
        }
        if (res == PYGEN_ERROR) {
            Py_DECREF(gen);
            return -1;
        }
        PyObject *op = item_of(cmd, 0);
        if (op == NULL)
            goto fail;
        long long t;
        int is_row = op_is(op, s_row), is_rowgap = !is_row && op_is(op, s_rowgap);
        if (is_row || is_rowgap) {
            Py_DECREF(op);
            PyObject *bus = item_of(cmd, 1), *row = bus ? item_of(cmd, 2) : NULL;
            Py_ssize_t index = 0;
            int r = row ? grant_row(bus, row, now, &t, &index) : -1;
            Py_XDECREF(bus);
            Py_XDECREF(row);
            if (r < 0)
                goto fail;
            value = PyLong_FromSsize_t(index);
            if (value == NULL)
                goto fail;
            if (t > until) {
                /* not over in time: no log entry, and the generator never resumes */
                Py_DECREF(cmd);
                return heap_push(self, t, gen, value, 0, 0);
            }
            /* logged as soon as granted: the generator resumes at its end, in time or never */
            PyObject *log = item_of(cmd, 3);
            if (log == NULL)
                goto fail;
            r = call_append(log, value);
            Py_DECREF(log);
            if (r < 0)
                goto fail;
            if (is_rowgap) {
                long long gap;
                PyObject *g = item_of(cmd, 4);
                if (g == NULL)
                    goto fail;
                r = as_time(g, &gap);
                Py_DECREF(g);
                if (r < 0)
                    goto fail;
                /* the steps of a "row" then a "sleep", each resuming at once when nothing
                 * else is due first and going through the heap otherwise */
                if (self->n == 0 || self->heap[0].t > t) {
                    now = self->now = t;
                    t = add_time(now, gap);
                } else {
                    Py_DECREF(cmd);
                    return heap_push(self, t, gen, value, 1, gap);
                }
            }
        } else if (op_is(op, s_txn)) {
            Py_DECREF(op);
            PyObject *bus = item_of(cmd, 1), *txn = bus ? item_of(cmd, 2) : NULL;
            if (txn == NULL) {
                Py_XDECREF(bus);
                goto fail;
            }
            PyObject *starts = PyObject_GetAttr(bus, s_starts);
            Py_ssize_t len = starts ? PyObject_Size(starts) : -1;
            Py_XDECREF(starts);
            PyObject *end = NULL;
            if (len >= 0) {
                PyObject *now_o = PyLong_FromLongLong(now);
                if (now_o != NULL) {
                    end = PyObject_CallMethodObjArgs(bus, s_grant_txn, txn, now_o, NULL);
                    Py_DECREF(now_o);
                }
            }
            Py_DECREF(bus);
            Py_DECREF(txn);
            if (end == NULL)
                goto fail;
            int r = as_time(end, &t);
            Py_DECREF(end);
            if (r < 0)
                goto fail;
            value = PyLong_FromSsize_t(len);
            if (value == NULL)
                goto fail;
        } else if (op_is(op, s_sleep) || op_is(op, s_until)) {
            int sleep = op_is(op, s_sleep);
            Py_DECREF(op);
            PyObject *a = item_of(cmd, 1);
            if (a == NULL)
                goto fail;
            long long x;
            int r = as_time(a, &x);
            Py_DECREF(a);
            if (r < 0)
                goto fail;
            t = sleep ? add_time(now, x > 0 ? x : 0) : (x > now ? x : now);
            value = Py_None;
            Py_INCREF(value);
        } else if (op_is(op, s_get)) {
            Py_DECREF(op);
            PyObject *q = item_of(cmd, 1);
            if (q == NULL)
                goto fail;
            PyObject *items = PyObject_GetAttr(q, s_items);
            int any = items ? PyObject_IsTrue(items) : -1;
            if (any > 0) {
                value = PyObject_CallMethodNoArgs(items, s_popleft);
                Py_DECREF(items);
                Py_DECREF(q);
                if (value == NULL)
                    goto fail;
                Py_DECREF(cmd);
                continue;
            }
            Py_XDECREF(items);
            if (any < 0) {
                Py_DECREF(q);
                goto fail;
            }
            PyObject *waiters = PyObject_GetAttr(q, s_waiters);
            Py_DECREF(q);
            int r = waiters ? call_append(waiters, gen) : -1;
            Py_XDECREF(waiters);
            Py_DECREF(cmd);
            Py_DECREF(gen);
            return r;
        } else {
            /* ValueError(op): PyErr_SetObject(ValueError, op) would take a tuple op as the
             * arguments and an exception op as the exception */
            PyObject *exc = PyObject_CallOneArg(PyExc_ValueError, op);
            Py_DECREF(op);
            if (exc != NULL) {
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
                Py_DECREF(exc);
            }
            goto fail;
        }
        Py_DECREF(cmd);
        /* Nothing else is due before (or at) t: going through the heap would pop this very
         * generator next, so resume it at once (ties go the heap way: they keep their order) */
        if (t <= until && (self->n == 0 || self->heap[0].t > t)) {
            now = self->now = t;
            continue;
        }
        return heap_push(self, t, gen, value, 0, 0);
    fail:
        Py_XDECREF(value);
        Py_DECREF(cmd);
        Py_DECREF(gen);
        return -1;
    }
}

static PyObject *Engine_run(EngineObject *self, PyObject *arg)
{
    long long until;
    if (as_ll(arg, &until) < 0)
        return NULL;
    if (until >= TIME_MAX) {
        /* the times kept as TIME_MAX are past it: they would come due */
        PyErr_SetString(PyExc_OverflowError, "run(until): until must be below 2**63 - 1 ps in the compiled engine");
        return NULL;
    }
    self->until = until;
    int r = 0;
    while (self->n > 0 && self->heap[0].t <= until) {
        Ev ev = heap_pop(self);
        self->now = ev.t;       /* the generators read engine.now */
        if (ev.hasgap) {
            /* a "rowgap" transaction's end: now the sleep, as resume() does it */
            long long t = add_time(ev.t, ev.gap);
            if (t > until || (self->n > 0 && self->heap[0].t <= t)) {
                if (heap_push(self, t, ev.gen, ev.value, 0, 0) < 0) {
                    r = -1;
                    break;
                }
                continue;
            }
            self->now = t;
        }
        if (resume(self, ev.gen, ev.value, until) < 0) {
            r = -1;
            break;
        }
    }
    self->until = -1;
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

typedef struct {
    long long t, seq;
} Key;

static int key_cmp(const void *a, const void *b)
{
    const Key *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static PyObject *Engine_pending(EngineObject *self, PyObject *Py_UNUSED(ignored))
{
    /* (time, sequence number) of every entry not run yet, in the order they would run. Taken
     * from a copy: building the tuples may start a collection, and its callbacks and finalizers
     * may schedule or run entries (the heap grows, shrinks, moves). */
    Py_ssize_t n = self->n;
    Key *keys = PyMem_Malloc(n ? (size_t)n * sizeof(Key) : 1);
    if (keys == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        keys[i].t = self->heap[i].t;
        keys[i].seq = self->heap[i].seq;
    }
    qsort(keys, (size_t)n, sizeof(Key), key_cmp);
    PyObject *out = PyList_New(n);
    if (out != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *x = Py_BuildValue("(LL)", keys[i].t, keys[i].seq);
            if (x == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, x);
        }
    }
    PyMem_Free(keys);
    return out;
}

static PyMethodDef Engine_methods[] = {
    {"at", (PyCFunction)(void (*)(void))Engine_at, METH_VARARGS | METH_KEYWORDS,
     "at(t, gen, value=None): resume gen with value at time t (ps)"},
    {"spawn", (PyCFunction)(void (*)(void))Engine_spawn, METH_VARARGS | METH_KEYWORDS,
     "spawn(gen, t=None): start gen at t (default: now)"},
    {"put", (PyCFunction)(void (*)(void))Engine_put, METH_FASTCALL,
     "put(q, item): hand item to q's first waiter, or queue it"},
    {"run", (PyCFunction)Engine_run, METH_O,
     "run(until): resume the due generators in time order until nothing is due at or before until"},
    {"pending", (PyCFunction)Engine_pending, METH_NOARGS,
     "pending() -> [(time, sequence number)] of the entries not run yet, in run order"},
    {NULL}
};

static PyMemberDef Engine_members[] = {
    {"now", T_LONGLONG, offsetof(EngineObject, now), 0, "the current time (ps)"},
    {"_seq", T_LONGLONG, offsetof(EngineObject, seq), READONLY, "entries scheduled so far"},
    {"_until", T_LONGLONG, offsetof(EngineObject, until), READONLY, "run()'s horizon while it runs, else -1"},
    {NULL}
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pcitrace.sim._engine.Engine",
    .tp_doc = "The simulator's generator-based discrete-event engine (pcitrace.sim.model.Engine in C).",
    .tp_basicsize = sizeof(EngineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Engine_new,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_traverse = (traverseproc)Engine_traverse,
    .tp_clear = (inquiry)Engine_clear,
    .tp_methods = Engine_methods,
    .tp_members = Engine_members,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_engine", "The simulator's event engine, compiled.", -1, NULL,
};

PyMODINIT_FUNC PyInit__engine(void)
{
    struct { PyObject **var; const char *s; } names[] = {
        {&s_period, "period"}, {&s_phase, "phase"}, {&s_free, "free"}, {&s_limit, "limit"},
        {&s_starts, "starts"}, {&s_reqs, "reqs"}, {&s_flat, "flat"}, {&s_append, "append"}, {&s_extend, "extend"},
        {&s_items, "items"}, {&s_waiters, "waiters"}, {&s_popleft, "popleft"},
        {&s_grant_txn, "grant_txn"}, {&s_row, "row"}, {&s_rowgap, "rowgap"}, {&s_txn, "txn"},
        {&s_sleep, "sleep"}, {&s_until, "until"}, {&s_get, "get"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i].var == NULL && (*names[i].var = PyUnicode_InternFromString(names[i].s)) == NULL)
            return NULL;
    }
    if (PyType_Ready(&EngineType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
