/* context.cu - the CUDA-GL executor's open: the CUDA device, the EGL device that drives it and an
 * OpenGL context on it (shared EGL displays counted), making that context current, the end of a
 * call on the stream (px__join_out), and the error report of a failed CUDA call (an executor that
 * cannot be had fails with errors.def's executor codes). Close, which undoes every file's work, is
 * run.cu's, beside the ops table. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "executor.cuh"

int px__cuda_fail(pxvm_error *err, const char *what, cudaError_t e, const char *file, int line)
{
    return pxvm_fail(err, PXE_CUDA_CALL, -1, -1, what, cudaGetErrorString(e), cudaGetErrorName(e), file, line);
}

/* The EGL device that drives CUDA device `cuda_dev`; PXVM_EGL_DEVICE=k forces EGL device k (and
 * is checked like any other choice). Never falls back to EGL_DEFAULT_DISPLAY: CUDA and EGL may
 * number devices differently, and interop across two GPUs fails. */
static int px__egl_open(pxvm_executor *ex, pxvm_error *err)
{
    PFNEGLQUERYDEVICESEXTPROC query_devices = (PFNEGLQUERYDEVICESEXTPROC)eglGetProcAddress("eglQueryDevicesEXT");
    PFNEGLQUERYDEVICEATTRIBEXTPROC query_attrib =
        (PFNEGLQUERYDEVICEATTRIBEXTPROC)eglGetProcAddress("eglQueryDeviceAttribEXT");
    PFNEGLGETPLATFORMDISPLAYEXTPROC platform_display =
        (PFNEGLGETPLATFORMDISPLAYEXTPROC)eglGetProcAddress("eglGetPlatformDisplayEXT");
    if (!query_devices || !query_attrib || !platform_display)
        return pxvm_fail(err, PXE_EGL_NO_PLATFORM, -1, -1);
    EGLDeviceEXT devs[32];
    EGLint n = 0;
    if (!query_devices(32, devs, &n) || n < 1)
        return pxvm_fail(err, PXE_EGL_NO_DEVICES, -1, -1, (unsigned)eglGetError());
    int pick = -1;
    const char *force = getenv("PXVM_EGL_DEVICE");
    if (force && *force) {
        pick = atoi(force);
        if (pick < 0 || pick >= n)
            return pxvm_fail(err, PXE_EGL_FORCED, -1, -1, force, (int)n);
        EGLAttrib cuda_id = -1;
        if (!query_attrib(devs[pick], EGL_CUDA_DEVICE_NV, &cuda_id))
            return pxvm_fail(err, PXE_EGL_NOT_CUDA, -1, -1, pick);
        if ((int)cuda_id != ex->device)
            return pxvm_fail(err, PXE_EGL_OTHER_GPU, -1, -1, pick, (int)cuda_id, ex->device);
    } else {
        for (int i = 0; i < n && pick < 0; i++) {
            EGLAttrib cuda_id = -1;
            if (query_attrib(devs[i], EGL_CUDA_DEVICE_NV, &cuda_id) && (int)cuda_id == ex->device)
                pick = i;
        }
        if (pick < 0)
            return pxvm_fail(err, PXE_EGL_NO_MATCH, -1, -1, (int)n, ex->device);
    }
    ex->dpy = platform_display(EGL_PLATFORM_DEVICE_EXT, devs[pick], NULL);
    EGLint major, minor;
    if (ex->dpy == EGL_NO_DISPLAY || !eglInitialize(ex->dpy, &major, &minor)) {
        ex->dpy = EGL_NO_DISPLAY; /* not ours to terminate */
        return pxvm_fail(err, PXE_EGL_INITIALIZE, -1, -1, pick, (unsigned)eglGetError());
    }
    px__egl_hold(ex->dpy, 1);
    const EGLint cfg_attr[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
    EGLConfig cfg;
    EGLint ncfg = 0;
    if (!eglChooseConfig(ex->dpy, cfg_attr, &cfg, 1, &ncfg) || ncfg < 1)
        return pxvm_fail(err, PXE_EGL_CONFIG, -1, -1, pick);
    if (!eglBindAPI(EGL_OPENGL_API))
        return pxvm_fail(err, PXE_EGL_BIND_API, -1, -1, (unsigned)eglGetError());
    const EGLint ctx_attr[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 5,
                               EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
    ex->ctx = eglCreateContext(ex->dpy, cfg, EGL_NO_CONTEXT, ctx_attr);
    if (ex->ctx == EGL_NO_CONTEXT)
        return pxvm_fail(err, PXE_GL_CONTEXT, -1, -1, pick, (unsigned)eglGetError());
    if (!eglMakeCurrent(ex->dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ex->ctx))
        return pxvm_fail(err, PXE_EGL_MAKE_CURRENT, -1, -1, (unsigned)eglGetError());
    glewExperimental = GL_TRUE;
    GLenum g = glewInit();
    /* Debian's GLEW is built for GLX: under EGL it reports GLEW_ERROR_NO_GLX_DISPLAY after loading
     * every core entry point. Accept exactly that, then check the entry points we call. */
    if (g != GLEW_OK && g != GLEW_ERROR_NO_GLX_DISPLAY)
        return pxvm_fail(err, PXE_GLEW_INIT, -1, -1, (const char *)glewGetErrorString(g));
    if (!glTexStorage2D)
        return pxvm_fail(err, PXE_GLEW_TEX_STORAGE, -1, -1);
    return 0;
}

int px__gl_open(pxvm_executor **out, const pxvm_open_options *opt, pxvm_error *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    int driver = 0; /* 0: no driver at all, which the runtime words as a driver too old */
    if (e != cudaSuccess && cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0)
        return pxvm_fail(err, PXE_CUDA_NO_DRIVER, -1, -1, cudaGetErrorName(e));
    if (e != cudaSuccess)
        return pxvm_fail(err, PXE_CUDA_NO_DEVICE, -1, -1, cudaGetErrorString(e), cudaGetErrorName(e));
    int device = opt ? opt->device : 0;
    if (device < 0 || device >= count)
        return pxvm_fail(err, PXE_CUDA_DEVICE_RANGE, -1, -1, device, count);
    pxvm_executor *ex = (pxvm_executor *)calloc(1, sizeof *ex);
    if (!ex)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *ex);
    ex->device = device;
    ex->dpy = EGL_NO_DISPLAY;
    ex->ctx = EGL_NO_CONTEXT;
    *out = ex;
    if ((e = cudaSetDevice(device)) != cudaSuccess)
        return pxvm_fail(err, PXE_CUDA_SET_DEVICE, -1, -1, device, cudaGetErrorString(e));
    if ((e = cudaStreamCreateWithFlags(&ex->own_stream, cudaStreamNonBlocking)) != cudaSuccess)
        return pxvm_fail(err, PXE_CUDA_DEVICE_UNUSABLE, -1, -1, device, cudaGetErrorString(e));
    ex->stream = ex->own_stream;
    if (px__egl_open(ex, err) < 0)
        return -1;
    PX__CK(cudaEventCreateWithFlags(&ex->ev_out, cudaEventDisableTiming));
    return 0;
}

/* An EGL device display is one per GPU and process: every executor on a GPU gets the same handle,
 * and eglTerminate would end the contexts of all of them (measured: closing one of two executors
 * made the other's interop calls fail). Each executor holds a reference; the last terminates.
 * Returns the references left after adding `delta`. */
int px__egl_hold(EGLDisplay dpy, int delta)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        EGLDisplay dpy;
        int refs;
    } held[32];
    pthread_mutex_lock(&lock);
    int i = 0, free_at = -1;
    for (; i < 32 && held[i].dpy != dpy; i++)
        if (free_at < 0 && held[i].refs == 0)
            free_at = i;
    if (i == 32 && free_at >= 0) /* a new display */
        i = free_at, held[i].dpy = dpy, held[i].refs = 0;
    int left = 0;
    if (i < 32) {
        held[i].refs += delta;
        left = held[i].refs;
        if (left <= 0)
            held[i].dpy = EGL_NO_DISPLAY, held[i].refs = 0, left = 0;
    }
    pthread_mutex_unlock(&lock);
    return left;
}

/* Interop calls act on the GL context current on the calling thread: a process may hold several
 * executors (one context each), so each makes its own current before any GL or interop call. */
void px__make_current(pxvm_executor *ex)
{
    if (ex->dpy != EGL_NO_DISPLAY && ex->ctx != EGL_NO_CONTEXT && eglGetCurrentContext() != ex->ctx)
        eglMakeCurrent(ex->dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ex->ctx);
}

/* The end of a call that enqueued work: with a caller's stream the work is on it (ordered with
 * the caller's other work, nothing to wait for); without, the call returns when it is done. */
int px__join_out(pxvm_executor *ex, pxvm_error *err)
{
    if (!ex->user_stream)
        PX__CK(cudaStreamSynchronize(ex->stream));
    return 0;
}
