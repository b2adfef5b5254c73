/* pxvm._native: the Python layer's one call per run (pxvm_runner_exec), compiled.
 *
 * One file of about 700 lines because it is one thing, the prepared call: its type (Call), with
 * run() and the checks of each array, prepare() that makes one, and bind() that hands it the
 * library; they share the Call's layout and the library's function pointers, and the Makefile
 * builds the extension module from this one source (NATIVE_SO).
 *
 * The ctypes path (runner.py, Runner._exec) describes every array again on each call: tens of
 * microseconds of Python. Here a prepared call is made once, from what a successful ctypes call
 * used (the runner handle, the slots, the views it filled, and how each array looked: shape,
 * strides, dtype, device); its run(*arrays) then only takes each array's data pointer (the buffer
 * protocol for NumPy, data_ptr() for torch tensors), checks that the array still looks as
 * prepared, and calls pxvm_runner_exec. An array that looks otherwise makes run() return None, and
 * the caller takes the ctypes path, which describes it anew (and prepares again).
 *
 * A prepared call of Runner.tokens also reads the tokens after the run (pxvm_runner_read_tokens,
 * with the pxvm_token_format made once), into the one output view past the run's own: bind, run
 * and read in one call, as a C caller makes them.
 *
 * Built against the limited API of Python 3.11 (one _native.abi3.so for 3.11 and later). It does
 * not link libpxvm: bind() hands it the addresses of the functions in the library that the ctypes
 * layer loaded (PXVM_LIB, the package's copy, a checkout's build/, the installed one), so handles
 * never cross two copies of the library, and one .so serves every build and install.
 *
 * No allocation of ours per call: the views, slots and Py_buffers live in the prepared call.
 * (Python objects that a call returns are new: the output arrays, and the ints torch returns.) */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "pxvm.h"

/* The library's entry points, with the header's exact types (a signature change breaks the build). */
static __typeof__(&pxvm_runner_exec) lib_exec;
static __typeof__(&pxvm_runner_set_stream) lib_set_stream;
static __typeof__(&pxvm_runner_read_tokens) lib_read_tokens;
static PyObject *raise_error; /* errors._check(rc): raises the package's class with pxvm_errmsg() */

static PyObject *s_dtype, *s_shape, *s_stride, *s_get_device, *s_data_ptr; /* interned names */

enum { ARG_BUFFER = 0, ARG_TORCH = 1 };
#define MAX_DIMS 8
#define MAX_VIEWS 64

/* How one argument of run() must look, and the view it fills. */
typedef struct {
    int view;                 /* index into views: inputs first, then outputs */
    int kind;                 /* ARG_BUFFER (byte strides) or ARG_TORCH (element strides, dtype checked) */
    int ndim;
    Py_ssize_t shape[MAX_DIMS], strides[MAX_DIMS]; /* ARG_BUFFER */
    Py_ssize_t itemsize;      /* ARG_BUFFER: 1 for images; 2 or 4 for tokens (float16, bfloat16 bits, float32) */
    char format[4];           /* ARG_BUFFER: the buffer protocol's format ("B", "e", "H", "f") */
    PyObject *type, *dtype, *shape_obj, *strides_obj; /* ARG_TORCH: exact type, dtype, shape, stride() */
    long device;              /* ARG_TORCH: get_device() (-1: CPU) */
} arg_desc;

/* An output that run() makes: fn(*args, **kwargs), e.g. numpy.empty or torch.empty. */
typedef struct {
    int view, kind;
    PyObject *fn, *args, *kwargs;
} alloc_desc;

typedef struct {
    PyObject_HEAD
    pxvm_runner *run;
    int nin, nout, narg, nalloc;
    int in_slots[MAX_VIEWS], in_items[MAX_VIEWS], out_slots[MAX_VIEWS], out_kinds[MAX_VIEWS];
    pxvm_view views[2 * MAX_VIEWS + 1]; /* nin inputs, then nout outputs, then the tokens' destination */
    arg_desc *args;
    alloc_desc *allocs;
    Py_buffer *bufs;      /* narg + nalloc; held[i]: bufs[i] is to be released */
    char *held;
    PyObject **made;      /* nalloc outputs of the call under way */
    PyObject **lent;      /* narg: the arguments of the last run that succeeded, kept alive while their slot
                           * may borrow them */
    PyObject **failed;    /* narg: those of a failed run since (or NULL): a library that leaves a failed
                           * call's inputs bound may read them too, so they are kept alive as well */
    /* streams: the runner's {batch: stream set} dict (None: a CPU runner), stream_key its batch;
     * on_cuda: CUDA arrays (order after stream_fn(device), torch's current stream), else host
     * arrays (no stream: unset one the ctypes path set) */
    PyObject *streams, *stream_key, *stream_fn, *device_obj;
    int on_cuda;
    /* tokens (Runner.tokens): read after the run from atlas tok_slot into views[nin + nout] */
    int tok_on, tok_slot, tok_device;
    pxvm_token_format tok_fmt;
    int busy;             /* a call under way (with the GIL released): another thread is refused */
    unsigned long long hits, misses;
} Call;

static PyTypeObject *call_type;

/* *slot = value (a new reference), releasing what it held (Py_XSETREF is not in the limited API) */
static void set_ref(PyObject **slot, PyObject *value)
{
    PyObject *old = *slot;
    *slot = value;
    Py_XDECREF(old);
}

static void release_bufs(Call *c)
{
    for (int i = 0; i < c->narg + c->nalloc; i++)
        if (c->held[i]) {
            PyBuffer_Release(&c->bufs[i]);
            c->held[i] = 0;
        }
}

/* 1: b is a buffer of the prepared format, shape and strides; 0: it is not. */
static int buffer_matches(const arg_desc *d, const Py_buffer *b)
{
    if (b->itemsize != d->itemsize || !b->format || strcmp(b->format, d->format) != 0 || b->ndim != d->ndim ||
        !b->strides)
        return 0;
    for (int k = 0; k < d->ndim; k++)
        if (b->shape[k] != d->shape[k] || b->strides[k] != d->strides[k])
            return 0;
    return 1;
}

/* 1: `x`'s attribute (or method's result) `name` equals `want`; 0: it does not; -1: an error. */
static int torch_field_is(PyObject *x, PyObject *name, int call, PyObject *want)
{
    PyObject *v = call ? PyObject_CallMethodObjArgs(x, name, NULL) : PyObject_GetAttr(x, name);
    if (!v)
        return -1;
    int r = v == want ? 1 : PyObject_RichCompareBool(v, want, Py_EQ);
    Py_DECREF(v);
    return r;
}

static int torch_pointer(PyObject *x, void **ptr)
{
    PyObject *v = PyObject_CallMethodObjArgs(x, s_data_ptr, NULL);
    if (!v)
        return -1;
    *ptr = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : 1;
}

/* The data pointer of argument i into its view: 1 done, 0 it does not look as prepared, -1 error. */
static int take_arg(Call *c, int i, PyObject *x)
{
    const arg_desc *d = &c->args[i];
    void *ptr;
    if (d->kind == ARG_BUFFER) {
        Py_buffer *b = &c->bufs[i];
        if (PyObject_GetBuffer(x, b, d->view < c->nin ? PyBUF_RECORDS_RO : PyBUF_RECORDS) != 0) {
            PyErr_Clear(); /* no (writable) buffer: the ctypes path says what is wrong with it */
            return 0;
        }
        c->held[i] = 1;
        if (!buffer_matches(d, b))
            return 0;
        ptr = b->buf;
    } else {
        if (Py_TYPE(x) != (PyTypeObject *)d->type)
            return 0;
        int r = torch_field_is(x, s_dtype, 0, d->dtype);
        if (r == 1) {
            PyObject *dev = PyObject_CallMethodObjArgs(x, s_get_device, NULL);
            if (!dev)
                return -1;
            long devno = PyLong_AsLong(dev);
            Py_DECREF(dev);
            if (devno == -1 && PyErr_Occurred())
                return -1;
            r = devno == d->device;
        }
        if (r == 1)
            r = torch_field_is(x, s_shape, 0, d->shape_obj);
        if (r == 1)
            r = torch_field_is(x, s_stride, 1, d->strides_obj);
        if (r == 1)
            r = torch_pointer(x, &ptr);
        if (r != 1)
            return r;
    }
    c->views[d->view].data = ptr;
    return 1;
}

/* A new output for allocs[j] into its view (made[j]); 0 or -1 with an exception. */
static int make_output(Call *c, int j)
{
    const alloc_desc *a = &c->allocs[j];
    PyObject *o = PyObject_Call(a->fn, a->args, a->kwargs);
    if (!o)
        return -1;
    c->made[j] = o;
    void *ptr;
    if (a->kind == ARG_BUFFER) {
        Py_buffer *b = &c->bufs[c->narg + j];
        if (PyObject_GetBuffer(o, b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0)
            return -1;
        c->held[c->narg + j] = 1;
        ptr = b->buf;
    } else if (torch_pointer(o, &ptr) < 0) {
        return -1;
    }
    c->views[a->view].data = ptr;
    return 0;
}

/* The runner's stream as the ctypes path leaves it (Runner._exec, _sync_stream): CUDA arrays are
 * ordered on torch's current stream (0, the legacy default stream, given as 1: cudaStreamLegacy);
 * host arrays use none. runner._stream stays the one record of what is set. */
static int sync_stream(Call *c)
{
    if (c->streams == Py_None)
        return 0;
    PyObject *cur = PyDict_GetItemWithError(c->streams, c->stream_key); /* borrowed */
    if (!cur && PyErr_Occurred())
        return -1;
    PyObject *want;
    void *handle = NULL;
    if (!c->on_cuda) {
        int set = cur ? PyObject_IsTrue(cur) : 0;
        if (set <= 0)
            return set;
        want = PyLong_FromLong(0);
    } else {
        want = PyObject_CallFunctionObjArgs(c->stream_fn, c->device_obj, NULL);
        if (!want)
            return -1;
        handle = PyLong_AsVoidPtr(want);
        if (!handle && !PyErr_Occurred()) {
            Py_DECREF(want);
            handle = (void *)1;
            want = PyLong_FromLong(1);
        }
        if (PyErr_Occurred()) {
            Py_XDECREF(want);
            return -1;
        }
        if (cur) {
            void *now = PyLong_AsVoidPtr(cur);
            if (now == handle && !PyErr_Occurred()) {
                Py_DECREF(want);
                return 0;
            }
            PyErr_Clear();
        }
    }
    if (!want)
        return -1;
    int rc = lib_set_stream(c->run, handle);
    if (rc) {
        Py_DECREF(want);
        Py_XDECREF(PyObject_CallFunction(raise_error, "i", rc));
        return -1;
    }
    rc = PyDict_SetItem(c->streams, c->stream_key, want);
    Py_DECREF(want);
    return rc;
}

/* call_run's work, with c->busy set */
static PyObject *run_prepared(Call *c, PyObject *const *argv)
{
    for (int i = 0; i < c->narg; i++) {
        int r = take_arg(c, i, argv[i]);
        if (r != 1) {
            release_bufs(c);
            if (r < 0)
                return NULL;
            c->misses++;
            Py_RETURN_NONE;
        }
    }
    int j = 0;
    for (; j < c->nalloc; j++)
        if (make_output(c, j) < 0)
            goto fail;
    if (sync_stream(c) < 0)
        goto fail;
    int rc, ran;
    Py_BEGIN_ALLOW_THREADS
    rc = lib_exec(c->run, c->nin, c->in_slots, c->in_items, c->views, c->nout, c->out_slots, c->out_kinds,
                  c->views + c->nin);
    ran = !rc;
    if (ran && c->tok_on)
        rc = lib_read_tokens(c->run, c->tok_slot, 0, 1, &c->tok_fmt, c->views[c->nin + c->nout].data, c->tok_device);
    Py_END_ALLOW_THREADS
    release_bufs(c);
    /* the slots may now read these inputs in place: kept alive until a later run succeeds (Runner._lent) */
    for (int i = 0; i < c->narg; i++)
        if (c->args[i].view < c->nin) {
            Py_INCREF(argv[i]);
            if (ran) {
                set_ref(&c->lent[i], argv[i]);
                Py_CLEAR(c->failed[i]);
            } else {
                set_ref(&c->failed[i], argv[i]);
            }
        }
    if (rc) {
        Py_XDECREF(PyObject_CallFunction(raise_error, "i", rc));
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "pxvm._native: the library failed (class %d)", rc);
        goto fail_released;
    }
    c->hits++;
    if (c->nalloc == 1) {
        PyObject *o = c->made[0];
        c->made[0] = NULL;
        return o;
    }
    PyObject *t = PyTuple_New(c->nalloc);
    if (!t)
        goto fail_released;
    for (int k = 0; k < c->nalloc; k++) {
        PyTuple_SetItem(t, k, c->made[k]); /* steals */
        c->made[k] = NULL;
    }
    return t;
fail:
    release_bufs(c);
fail_released:
    for (int k = 0; k < c->nalloc; k++)
        Py_CLEAR(c->made[k]);
    return NULL;
}

/* Raises pxvm.UsageError (a ValueError) with `message`; returns NULL. */
static PyObject *usage_error(const char *message)
{
    PyObject *errors = PyImport_ImportModule("pxvm.errors");
    PyObject *cls = errors ? PyObject_GetAttrString(errors, "UsageError") : NULL;
    Py_XDECREF(errors);
    if (cls) {
        PyErr_SetString(cls, message);
        Py_DECREF(cls);
    }
    return NULL;
}

/* run(*arrays): the prepared call on these arrays (inputs, then the outputs the caller gives).
 * Returns the outputs it made (one: that array; else a tuple, () when the caller gave them all),
 * or None when an array does not look as prepared (nothing was run: take the ctypes path). */
static PyObject *call_run(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Call *c = (Call *)self;
    if (!c->run || !c->streams) /* not made by prepare(): the type refuses that, this is the second line */
        return usage_error("usage: pxvm._native.Call: made by pxvm._native.prepare only");
    if (argc != c->narg)
        return PyErr_Format(PyExc_TypeError, "pxvm._native: this call takes %d arrays, got %zd", c->narg, argc);
    /* Another thread in this call (the GIL is released around the run, and torch's getters may
     * let other threads in) owns the views, the buffers and the runner handle, which serves one
     * thread at a time: Runner's calls hold Runner.lock, so only a caller that bypassed it gets
     * here, and it is refused (falling back to the ctypes path would enter the same runner). */
    if (c->busy)
        return usage_error("usage: pxvm._native: a prepared call of this runner is running in another thread "
                           "(hold Runner.lock: one runner handle serves one thread at a time)");
    c->busy = 1;
    PyObject *r = run_prepared(c, argv);
    c->busy = 0;
    return r;
}

static void call_dealloc(PyObject *self)
{
    Call *c = (Call *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (c->held)
        release_bufs(c);
    for (int i = 0; c->args && i < c->narg; i++) {
        Py_XDECREF(c->args[i].type);
        Py_XDECREF(c->args[i].dtype);
        Py_XDECREF(c->args[i].shape_obj);
        Py_XDECREF(c->args[i].strides_obj);
        if (c->lent)
            Py_XDECREF(c->lent[i]);
        if (c->failed)
            Py_XDECREF(c->failed[i]);
    }
    for (int j = 0; c->allocs && j < c->nalloc; j++) {
        Py_XDECREF(c->allocs[j].fn);
        Py_XDECREF(c->allocs[j].args);
        Py_XDECREF(c->allocs[j].kwargs);
    }
    Py_XDECREF(c->streams);
    Py_XDECREF(c->stream_key);
    Py_XDECREF(c->stream_fn);
    Py_XDECREF(c->device_obj);
    PyMem_Free(c->args);
    PyMem_Free(c->allocs);
    PyMem_Free(c->bufs);
    PyMem_Free(c->held);
    PyMem_Free(c->made);
    PyMem_Free(c->lent);
    PyMem_Free(c->failed);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

static PyObject *call_hits(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(((Call *)self)->hits);
}

static PyObject *call_misses(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(((Call *)self)->misses);
}

static PyMethodDef call_methods[] = {
    {"run", (PyCFunction)(void (*)(void))call_run, METH_FASTCALL,
     "run(*arrays): the prepared call on these arrays (inputs, then the outputs given): the outputs it made "
     "(one array, or a tuple), or None when an array differs from the prepared description (nothing ran)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef call_getset[] = {
    {"hits", call_hits, NULL, "calls that ran through this prepared call", NULL},
    {"misses", call_misses, NULL, "calls given arrays unlike the prepared ones (None returned)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot call_slots[] = {
    {Py_tp_dealloc, (void *)call_dealloc},
    {Py_tp_methods, call_methods},
    {Py_tp_getset, call_getset},
    {Py_tp_doc, (void *)"A prepared pxvm_runner_exec call (pxvm._native.prepare)."},
    {0, NULL},
};

/* Only prepare() makes a Call (with its runner, views and arguments): the type has no tp_new, so
 * pxvm._native.Call() is a TypeError instead of an empty call whose run() would dereference NULL. */
static PyType_Spec call_spec = {"pxvm._native.Call", sizeof(Call), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, call_slots};

/* ints of a tuple into out[n]; -1 with an exception when it is not n ints. */
static int int_tuple(PyObject *t, int *out, Py_ssize_t n, const char *what)
{
    if (!PyTuple_Check(t) || PyTuple_Size(t) != n) {
        PyErr_Format(PyExc_ValueError, "pxvm._native.prepare: %s: a tuple of %zd ints", what, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        long v = PyLong_AsLong(PyTuple_GetItem(t, k));
        if (v == -1 && PyErr_Occurred())
            return -1;
        out[k] = (int)v;
    }
    return 0;
}

static int ssize_tuple(PyObject *t, Py_ssize_t *out, int *n)
{
    if (!PyTuple_Check(t) || PyTuple_Size(t) > MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "pxvm._native.prepare: shapes and strides are tuples of at most 8 ints");
        return -1;
    }
    *n = (int)PyTuple_Size(t);
    for (int k = 0; k < *n; k++) {
        out[k] = PyLong_AsSsize_t(PyTuple_GetItem(t, k));
        if (out[k] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* the first `size` bytes of a bytes-like object (ctypes structures' bytes) into out; -1 with an
 * exception when it has fewer */
static int struct_bytes(PyObject *b, void *out, size_t size, const char *what)
{
    Py_buffer v;
    if (PyObject_GetBuffer(b, &v, PyBUF_SIMPLE) != 0)
        return -1;
    int ok = v.len >= (Py_ssize_t)size;
    if (ok && size)
        memcpy(out, v.buf, size);
    PyBuffer_Release(&v);
    if (!ok)
        PyErr_Format(PyExc_ValueError, "pxvm._native.prepare: %s: fewer bytes than %zu", what, size);
    return ok ? 0 : -1;
}

/* views: the bytes of n pxvm_view (a ctypes array of pxvm.View) into out */
static int view_bytes(PyObject *b, pxvm_view *out, int n)
{
    return struct_bytes(b, out, sizeof(pxvm_view) * (size_t)n, "views");
}

static PyObject *prepare(PyObject *module, PyObject *a)
{
    (void)module;
    PyObject *handle, *in_slots, *in_items, *in_views, *out_slots, *out_kinds, *out_views, *args, *allocs, *stream;
    PyObject *tokens = Py_None;
    if (!lib_exec)
        return PyErr_Format(PyExc_RuntimeError, "pxvm._native: bind() was not called");
    if (!PyArg_ParseTuple(a, "OO!O!OO!O!OO!O!O|O:prepare", &handle, &PyTuple_Type, &in_slots, &PyTuple_Type,
                          &in_items, &in_views, &PyTuple_Type, &out_slots, &PyTuple_Type, &out_kinds, &out_views,
                          &PyTuple_Type, &args, &PyTuple_Type, &allocs, &stream, &tokens))
        return NULL;
    if (tokens != Py_None && !lib_read_tokens)
        return PyErr_Format(PyExc_RuntimeError, "pxvm._native.prepare: tokens need bind() with read_tokens' address");
    Py_ssize_t nin = PyTuple_Size(in_slots), nout = PyTuple_Size(out_slots);
    Py_ssize_t narg = PyTuple_Size(args), nalloc = PyTuple_Size(allocs);
    if (nin > MAX_VIEWS || nout > MAX_VIEWS || narg > 2 * MAX_VIEWS || nalloc > MAX_VIEWS)
        return PyErr_Format(PyExc_ValueError, "pxvm._native.prepare: at most %d inputs and %d outputs", MAX_VIEWS,
                            MAX_VIEWS);
    Call *c = (Call *)PyType_GenericAlloc(call_type, 0);
    if (!c)
        return NULL;
    c->nin = (int)nin;
    c->nout = (int)nout;
    c->narg = (int)narg;
    c->nalloc = (int)nalloc;
    c->tok_on = tokens != Py_None;
    Py_ssize_t nviews = nin + nout + c->tok_on; /* views that arguments and allocations may fill */
    c->args = PyMem_Calloc((size_t)narg + 1, sizeof(arg_desc));
    c->allocs = PyMem_Calloc((size_t)nalloc + 1, sizeof(alloc_desc));
    c->bufs = PyMem_Calloc((size_t)(narg + nalloc) + 1, sizeof(Py_buffer));
    c->held = PyMem_Calloc((size_t)(narg + nalloc) + 1, 1);
    c->made = PyMem_Calloc((size_t)nalloc + 1, sizeof(PyObject *));
    c->lent = PyMem_Calloc((size_t)narg + 1, sizeof(PyObject *));
    c->failed = PyMem_Calloc((size_t)narg + 1, sizeof(PyObject *));
    if (!c->args || !c->allocs || !c->bufs || !c->held || !c->made || !c->lent || !c->failed) {
        PyErr_NoMemory();
        goto fail;
    }
    c->run = PyLong_AsVoidPtr(handle);
    if (!c->run) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "pxvm._native.prepare: a NULL runner");
        goto fail;
    }
    if (int_tuple(in_slots, c->in_slots, nin, "in_slots") || int_tuple(in_items, c->in_items, nin, "in_items") ||
        int_tuple(out_slots, c->out_slots, nout, "out_slots") || int_tuple(out_kinds, c->out_kinds, nout, "out_kinds") ||
        view_bytes(in_views, c->views, c->nin) || view_bytes(out_views, c->views + nin, c->nout))
        goto fail;
    for (int i = 0; i < c->narg; i++) {
        arg_desc *d = &c->args[i];
        PyObject *shape, *strides, *type, *dtype;
        long device;
        const char *format = "B";
        d->itemsize = 1;
        if (!PyArg_ParseTuple(PyTuple_GetItem(args, i), "iiO!O!lOO|sn:arg", &d->view, &d->kind, &PyTuple_Type, &shape,
                              &PyTuple_Type, &strides, &device, &type, &dtype, &format, &d->itemsize))
            goto fail;
        int nst;
        if (d->view < 0 || d->view >= nviews || (d->kind != ARG_BUFFER && d->kind != ARG_TORCH) ||
            strlen(format) >= sizeof d->format || d->itemsize < 1 || ssize_tuple(shape, d->shape, &d->ndim) ||
            ssize_tuple(strides, d->strides, &nst) || nst != d->ndim) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "pxvm._native.prepare: a bad argument description");
            goto fail;
        }
        d->device = device;
        strcpy(d->format, format);
        if (d->kind == ARG_TORCH) {
            if (!PyType_Check(type)) {
                PyErr_SetString(PyExc_TypeError, "pxvm._native.prepare: a tensor argument needs its type");
                goto fail;
            }
            Py_INCREF(type);
            Py_INCREF(dtype);
            Py_INCREF(shape);
            Py_INCREF(strides);
            d->type = type;
            d->dtype = dtype;
            d->shape_obj = shape;
            d->strides_obj = strides;
        }
    }
    for (int j = 0; j < c->nalloc; j++) {
        alloc_desc *o = &c->allocs[j];
        PyObject *fn, *fn_args, *kwargs;
        if (!PyArg_ParseTuple(PyTuple_GetItem(allocs, j), "iiOO!O:alloc", &o->view, &o->kind, &fn, &PyTuple_Type,
                              &fn_args, &kwargs))
            goto fail;
        if (o->view < nin || o->view >= nviews || (o->kind != ARG_BUFFER && o->kind != ARG_TORCH) ||
            !PyCallable_Check(fn) || (kwargs != Py_None && !PyDict_Check(kwargs))) {
            PyErr_SetString(PyExc_ValueError, "pxvm._native.prepare: a bad output allocation");
            goto fail;
        }
        Py_INCREF(fn);
        Py_INCREF(fn_args);
        o->fn = fn;
        o->args = fn_args;
        if (kwargs != Py_None) {
            Py_INCREF(kwargs);
            o->kwargs = kwargs;
        }
    }
    int on_cuda = 0;
    PyObject *streams, *stream_key, *stream_fn, *device_obj;
    if (!PyArg_ParseTuple(stream, "OOpOO:stream", &streams, &stream_key, &on_cuda, &stream_fn, &device_obj))
        goto fail;
    c->on_cuda = on_cuda;
    Py_INCREF(streams);
    Py_INCREF(stream_key);
    Py_INCREF(stream_fn);
    Py_INCREF(device_obj);
    c->streams = streams;
    c->stream_key = stream_key;
    c->stream_fn = stream_fn;
    c->device_obj = device_obj;
    if (c->streams != Py_None && !PyDict_Check(c->streams)) {
        PyErr_SetString(PyExc_TypeError, "pxvm._native.prepare: streams is the runner's dict or None");
        goto fail;
    }
    if (c->tok_on) {
        PyObject *fmt;
        if (!PyArg_ParseTuple(tokens, "iOi:tokens", &c->tok_slot, &fmt, &c->tok_device) ||
            struct_bytes(fmt, &c->tok_fmt, sizeof c->tok_fmt, "the token format"))
            goto fail;
    }
    return (PyObject *)c;
fail:
    Py_DECREF(c);
    return NULL;
}

static PyObject *bind(PyObject *module, PyObject *a)
{
    (void)module;
    PyObject *exec_addr, *stream_addr, *check, *tokens_addr = Py_None;
    if (!PyArg_ParseTuple(a, "OOO|O:bind", &exec_addr, &stream_addr, &check, &tokens_addr))
        return NULL;
    void *e = PyLong_AsVoidPtr(exec_addr), *s = PyLong_AsVoidPtr(stream_addr);
    void *t = tokens_addr == Py_None ? NULL : PyLong_AsVoidPtr(tokens_addr);
    if (PyErr_Occurred())
        return NULL;
    if (!e || !s || !PyCallable_Check(check))
        return PyErr_Format(PyExc_ValueError, "pxvm._native.bind: two function addresses and a callable");
    /* ISO C has no conversion from void * to a function pointer; POSIX (dlsym) guarantees it */
    memcpy(&lib_exec, &e, sizeof e);
    memcpy(&lib_set_stream, &s, sizeof s);
    memcpy(&lib_read_tokens, &t, sizeof t);
    Py_INCREF(check);
    set_ref(&raise_error, check);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_VARARGS,
     "bind(exec_address, set_stream_address, check, read_tokens_address=None): the library's pxvm_runner_exec, "
     "pxvm_runner_set_stream and pxvm_runner_read_tokens (addresses in the library the ctypes layer loaded; "
     "without the last, prepared calls take no tokens) and errors._check (raises the package's error of a "
     "return code)."},
    {"prepare", prepare, METH_VARARGS,
     "prepare(handle, in_slots, in_items, in_views, out_slots, out_kinds, out_views, args, allocs, stream, "
     "tokens=None) -> Call.\n"
     "handle: the pxvm_runner* as an int; in_slots, in_items, out_slots, out_kinds: tuples of ints; in_views, "
     "out_views: the bytes of the pxvm_view arrays a ctypes call filled (their data pointers are replaced per "
     "call); args: per argument of run(), (view index (inputs first, then outputs), kind (0: buffer protocol, "
     "byte strides; 1: a tensor of exactly `type`), shape, strides, device, type, dtype[, buffer format, "
     "itemsize: \"B\", 1 unless given]); allocs: per output "
     "run() makes, (view index, kind, fn, args, kwargs or None); stream: (the runner's {batch: stream} dict or "
     "None, the batch, on_cuda, stream_fn(device) -> cudaStream_t, device); tokens: None, or (atlas slot, the "
     "bytes of a pxvm_token_format, destination device (-1: host)): after the run, its tokens are read into "
     "view len(in_slots) + len(out_slots), an argument or an allocation like the outputs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "pxvm._native",
    "The compiled fast path of pxvm.Runner (python/pxvm/_native.c): prepared pxvm_runner_exec calls.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (!s_dtype || !s_shape || !s_stride || !s_get_device || !s_data_ptr)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    call_type = (PyTypeObject *)PyType_FromSpec(&call_spec);
    if (!call_type || PyModule_AddObject(m, "Call", (PyObject *)call_type) < 0) {
        Py_XDECREF((PyObject *)call_type);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF((PyObject *)call_type); /* the module's reference was stolen by AddObject; this one is ours */
    return m;
}
