/* pxbatch - a program over a dataset, in shards: under mpirun one process per GPU (or per CPU
 * executor), each taking its share of the shards; without MPI one process with a worker per GPU.
 * Each shard is written all-or-nothing (patches .npy, then its index .json, the marker of a
 * finished shard), so a rerun skips finished shards; an input that fails to decode or bind is
 * listed in its shard's errors and does not stop the job. Decoding the next shard overlaps the
 * run of the current one (a host thread). Built with MPI when mpicc is present. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef PXVM_HAVE_MPI
#include <mpi.h>
#endif

#include <jansson.h>

#include "../vm/vm.h"

static const char px__usage[] =
    "usage: pxbatch PROGRAM.pxi (--in-list FILE | --in-dir DIR) --out DIR [options]\n"
    "  --shard-size N            images per shard (default 64)\n"
    "  --executor cpu|cuda|auto  (default auto: cuda when it works here)\n"
    "  --devices N               CUDA devices to use without MPI (default: all); under mpirun each\n"
    "                            rank takes device (local rank mod devices)\n"
    "  --threads N               CPU worker threads per process (default: all cores)\n"
    "  --decoders N              decoding threads per worker (default: cores / workers, 1..64)\n"
    "Writes DIR/shard-NNNNN.npy ((rows, patches, h, w, 4) uint8: the program's first patch atlas,\n"
    "or (rows, 1, H, W, 4) of its first output) and DIR/shard-NNNNN.json (file -> row, and the\n"
    "files that failed with their pxvm error). Finished shards are skipped on a rerun.\n"
    "Exit status: 0 all images done, 1 some input failed (listed in a shard's errors, this run's or\n"
    "an earlier one's), 2 usage,\n"
    "3-7 the program or executor failed (as pxrun).\n";

typedef struct {
    char **files;
    int nfiles;
    const char *prog_path, *out_dir, *exec_name;
    int shard_size, devices, threads, decoders;
    pxvm_limits lim;
} px__job;

/* ---- inputs --------------------------------------------------------------------------------- */

static int px__cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int px__add(px__job *j, int *cap, const char *s)
{
    if (j->nfiles == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        char **f = realloc(j->files, sizeof(char *) * (size_t)*cap);
        if (!f)
            return -1;
        j->files = f;
    }
    return (j->files[j->nfiles++] = strdup(s)) ? 0 : -1;
}

/* The dataset, in a fixed order: a list file's lines, or a folder's images sorted by name. */
static int px__inputs(px__job *j, const char *list, const char *dir)
{
    int cap = 0;
    if (list) {
        FILE *f = !strcmp(list, "-") ? stdin : fopen(list, "r");
        if (!f)
            return -1;
        char line[4096];
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = 0;
            if (line[0] && px__add(j, &cap, line) < 0)
                return -1;
        }
        if (f != stdin)
            fclose(f);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || e->d_name[0] == '.' ||
            (strcasecmp(dot, ".png") && strcasecmp(dot, ".jpg") && strcasecmp(dot, ".jpeg")))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (px__add(j, &cap, path) < 0) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    if (j->nfiles)
        qsort(j->files, (size_t)j->nfiles, sizeof(char *), px__cmp);
    return 0;
}

/* ---- one shard: decoded in the background, run as one batch, written all-or-nothing ---------- */

typedef struct {
    const px__job *job;
    const pxvm_program *prog;
    int shard, first, count;
    int w, h;           /* the input slot's size */
    pxvm_image *img;    /* [count] decoded (px NULL: failed) */
    char **why;         /* [count] the error of a failed input */
    pthread_t thread[64];
    struct px__decoder *dec;
    int started;       /* decoding threads running */
} px__shard;

typedef struct px__decoder {
    px__shard *s;
    int t, n; /* this thread decodes items t, t + n, ... */
} px__decoder;

static void *px__decode(void *arg)
{
    px__decoder *d = arg;
    px__shard *s = d->s;
    for (int i = d->t; i < s->count; i += d->n) {
        pxvm_error err;
        const char *path = s->job->files[s->first + i];
        if (pxvm_image_load_any(path, &s->job->lim, &s->img[i], &err) == 0 && (s->img[i].w != s->w || s->img[i].h != s->h)) {
            pxvm_fail(&err, PXE_INPUT_SIZE, -1, -1, s->img[i].w, s->img[i].h, 1, "input", s->w, s->h);
            pxvm_image_free(&s->img[i]);
        }
        if (!s->img[i].px) {
            char buf[1024];
            pxvm_error_format(&err, buf, sizeof buf);
            s->why[i] = strdup(buf);
        }
    }
    return NULL;
}



static int px__shard_start(px__shard *s, const px__job *j, const pxvm_program *prog, int input, int shard)
{
    memset(s, 0, sizeof *s);
    s->job = j, s->prog = prog, s->shard = shard;
    s->first = shard * j->shard_size;
    s->count = j->nfiles - s->first < j->shard_size ? j->nfiles - s->first : j->shard_size;
    s->w = prog->slots[input].w, s->h = prog->slots[input].h;
    s->img = calloc((size_t)s->count, sizeof(pxvm_image));
    s->why = calloc((size_t)s->count, sizeof(char *));
    if (!s->img || !s->why)
        return -1;
    /* the images of a shard are decoded by several host threads, so that decoding keeps up with
     * the GPU where the cores allow (JPEG decoding is the slow part of a pipeline) */
    int n = j->decoders < s->count ? j->decoders : s->count;
    s->dec = calloc((size_t)(n > 0 ? n : 1), sizeof(px__decoder));
    for (int t = 0; s->dec && t < n; t++) {
        s->dec[t] = (px__decoder){s, t, n};
        if (pthread_create(&s->thread[s->started], NULL, px__decode, &s->dec[t]) == 0)
            s->started++;
        else
            px__decode(&s->dec[t]);
    }
    return 0;
}

static void px__shard_join(px__shard *s)
{
    for (int t = 0; t < s->started; t++)
        pthread_join(s->thread[t], NULL);
    s->started = 0;
}

static void px__shard_free(px__shard *s)
{
    px__shard_join(s);
    free(s->dec);
    for (int i = 0; i < s->count; i++) {
        pxvm_image_free(&s->img[i]);
        free(s->why[i]);
    }
    free(s->img);
    free(s->why);
    memset(s, 0, sizeof *s);
}

static void px__json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void px__shard_path(const px__job *j, int shard, const char *ext, char *buf, size_t len)
{
    snprintf(buf, len, "%s/shard-%05d.%s", j->out_dir, shard, ext);
}

typedef struct {
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    int batch;
    uint64_t images, failed, bytes_in, bytes_out;
} px__worker_state;

/* Runs a decoded shard and writes it; returns the pxvm class of a failure of the program or the
 * executor (0: written, bad inputs listed). */
static int px__shard_run(px__worker_state *w, px__shard *s, int input, int out_slot, pxvm_error *err)
{
    const pxvm_program *prog = s->prog;
    const pxvm_slot *o = &prog->slots[out_slot];
    px__shard_join(s);
    int rows = 0, dummy = -1;
    for (int i = 0; i < s->count; i++)
        if (s->img[i].px) {
            dummy = dummy < 0 ? i : dummy;
            pxvm_view v = pxvm_image_view(&s->img[i]);
            if (w->ops->bind(w->ex, input, rows++, &v, err) < 0)
                return err->cls;
            w->bytes_in += (uint64_t)s->img[i].w * (uint64_t)s->img[i].h * 4u;
        }
    size_t per = o->patch_count ? (size_t)o->patch_w * o->patch_h * o->patch_count * 4u : (size_t)o->w * o->h * 4u;
    uint8_t *out = NULL;
    if (rows) {
        for (int b = rows; b < w->batch; b++) { /* the unused items of a short shard: any valid image */
            pxvm_view v = pxvm_image_view(&s->img[dummy]);
            if (w->ops->bind(w->ex, input, b, &v, err) < 0)
                return err->cls;
        }
        pxvm_run_options ro = {s->job->lim.max_steps, NULL, NULL, NULL, NULL};
        if (w->ops->run(w->ex, &ro, err) < 0)
            return err->cls;
        out = malloc(per * (size_t)rows);
        if (!out)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(per * (size_t)rows)), PXVM_IO;
        pxvm_view v = o->patch_count ? pxvm_view_host(out, o->patch_w, o->patch_h * o->patch_count, 4)
                                     : pxvm_view_host(out, o->w, o->h, 4);
        v.items = rows;
        v.item_stride = (int64_t)per;
        if (w->ops->read(w->ex, out_slot, 0, 0, &v, o->patch_count > 0, err) < 0) {
            free(out);
            return err->cls;
        }
    }
    uint8_t *npy = NULL, *index = NULL;
    size_t npy_len = 0, index_len = 0;
    int pn = o->patch_count ? o->patch_count : 1, ph = o->patch_count ? o->patch_h : o->h, pw = o->patch_count ? o->patch_w : o->w;
    const int shape[5] = {rows, pn, ph, pw, 4};
    int rc = pxvm_npy_encode_shape(out, 5, shape, &npy, &npy_len, err);
    free(out);
    if (rc < 0)
        return err->cls;
    FILE *f = open_memstream((char **)&index, &index_len);
    fprintf(f, "{\"shard\": %d, \"program\": ", s->shard);
    px__json_str(f, s->job->prog_path);
    fprintf(f, ", \"slot\": ");
    px__json_str(f, o->name[0] ? o->name : "output");
    fprintf(f, ", \"shape\": [%d, %d, %d, %d, 4],\n \"rows\": [", rows, pn, ph, pw);
    int r = 0, first = 1;
    for (int i = 0; i < s->count; i++)
        if (s->img[i].px) {
            fprintf(f, "%s\n  {\"row\": %d, \"file\": ", first ? "" : ",", r++);
            px__json_str(f, s->job->files[s->first + i]);
            fputc('}', f);
            first = 0;
        }
    fprintf(f, "],\n \"errors\": [");
    first = 1;
    for (int i = 0; i < s->count; i++)
        if (!s->img[i].px) {
            fprintf(f, "%s\n  {\"file\": ", first ? "" : ",");
            px__json_str(f, s->job->files[s->first + i]);
            fprintf(f, ", \"error\": ");
            px__json_str(f, s->why[i] ? s->why[i] : "?");
            fputc('}', f);
            first = 0;
            w->failed++;
        }
    fprintf(f, "]}\n");
    fclose(f);
    /* the index, written last, marks the shard finished */
    char pn_path[4200], pi_path[4200];
    px__shard_path(s->job, s->shard, "npy", pn_path, sizeof pn_path);
    px__shard_path(s->job, s->shard, "json", pi_path, sizeof pi_path);
    pxvm_outputs files = {0};
    rc = pxvm_outputs_add(&files, pn_path, npy, npy_len, err) == 0 && pxvm_outputs_commit(&files, err) == 0 &&
                 pxvm_outputs_add(&files, pi_path, index, index_len, err) == 0 && pxvm_outputs_commit(&files, err) == 0
             ? 0
             : err->cls;
    if (rc)
        pxvm_outputs_abort(&files);
    w->images += (uint64_t)rows;
    w->bytes_out += npy_len + index_len;
    free(npy);
    free(index);
    return rc;
}

/* ---- workers -------------------------------------------------------------------------------- */

typedef struct {
    const px__job *job;
    const pxvm_program *prog;
    int input, out_slot;
    int slot_id, nslots_total; /* this worker takes shards slot_id, slot_id + nslots_total, ... */
    int device, is_rank0_first;
    const char *exec;
    px__worker_state st;
    pxvm_error err;
    int rc;
    int skipped;
} px__worker;

static double px__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A finished shard (its index exists); adds the inputs it lists as failed to *failed, so that a
 * resumed job's status still says whether anything failed. */
static int px__done(const px__job *j, int shard, uint64_t *failed)
{
    char path[4200];
    px__shard_path(j, shard, "json", path, sizeof path);
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    json_t *index = json_load_file(path, 0, NULL);
    *failed += (uint64_t)json_array_size(json_object_get(index, "errors"));
    json_decref(index);
    return 1;
}

/* Temporary files a killed earlier run (SIGKILL cannot be caught) left for this worker's shards. */
static void px__remove_stale(const px__job *j, int slot_id, int nslots_total)
{
    DIR *d = opendir(j->out_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int shard;
        if (sscanf(e->d_name, "shard-%d.", &shard) == 1 && strstr(e->d_name, ".tmp-") && shard % nslots_total == slot_id) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", j->out_dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
}

static void *px__work(void *arg)
{
    px__worker *w = arg;
    const px__job *j = w->job;
    int nshards = (j->nfiles + j->shard_size - 1) / j->shard_size;
    pxvm_open_options oo = {j->threads, w->device};
    const pxvm_executor_ops *ops;
    if (pxvm_executor_open_named(w->exec, &oo, &ops, &w->st.ex, NULL, &w->err) < 0) {
        w->rc = w->err.cls;
        return NULL;
    }
    w->st.ops = ops;
    w->st.batch = j->shard_size;
    if (ops->load(w->st.ex, w->prog, j->shard_size, &w->err) < 0) {
        w->rc = w->err.cls;
        ops->close(w->st.ex);
        return NULL;
    }
    /* two shards in flight: the decode thread of `next` holds its address, so they swap pointers */
    px__remove_stale(j, w->slot_id, w->nslots_total);
    px__shard shards[2], *cur, *next = &shards[0];
    int have_next = 0, s = w->slot_id;
    while (s < nshards && px__done(j, s, &w->st.failed))
        s += w->nslots_total, w->skipped++;
    if (s < nshards && px__shard_start(next, j, w->prog, w->input, s) == 0)
        have_next = 1;
    double t0 = px__now();
    int tty = w->is_rank0_first && isatty(2);
    while (have_next) {
        cur = next;
        next = cur == &shards[0] ? &shards[1] : &shards[0];
        have_next = 0;
        int n = cur->shard + w->nslots_total;
        while (n < nshards && px__done(j, n, &w->st.failed))
            n += w->nslots_total, w->skipped++;
        if (n < nshards && px__shard_start(next, j, w->prog, w->input, n) == 0) /* decodes while cur runs */
            have_next = 1;
        int rc = px__shard_run(&w->st, cur, w->input, w->out_slot, &w->err);
        int done_shard = cur->shard;
        px__shard_free(cur);
        if (rc) {
            w->rc = rc;
            break;
        }
        if (tty)
            fprintf(stderr, "\rpxbatch: shard %d of %d, %" PRIu64 " images, %.0f images/s   ", done_shard + 1, nshards,
                    w->st.images, (double)w->st.images / (px__now() - t0));
    }
    if (have_next)
        px__shard_free(next);
    if (tty)
        fputc('\n', stderr);
    ops->close(w->st.ex);
    return NULL;
}


int main(int argc, char **argv)
{
    int rank = 0, size = 1, local_rank = 0;
#ifdef PXVM_HAVE_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
#endif
    signal(SIGPIPE, SIG_IGN);
    px__job j;
    memset(&j, 0, sizeof j);
    j.shard_size = 64;
    j.exec_name = "auto";
    pxvm_limits_default(&j.lim);
    const char *list = NULL, *dir = NULL;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            if (rank == 0)
                fputs(px__usage, stdout);
            goto end;
        } else if (v && !strcmp(o, "--in-list"))
            list = v, i++;
        else if (v && !strcmp(o, "--in-dir"))
            dir = v, i++;
        else if (v && !strcmp(o, "--out"))
            j.out_dir = v, i++;
        else if (v && !strcmp(o, "--executor"))
            j.exec_name = v, i++;
        else if (v && !strcmp(o, "--shard-size") && atoi(v) >= 1 && atoi(v) <= 4096)
            j.shard_size = atoi(v), i++;
        else if (v && !strcmp(o, "--devices") && atoi(v) >= 1)
            j.devices = atoi(v), i++;
        else if (v && !strcmp(o, "--decoders") && atoi(v) >= 1 && atoi(v) <= 64)
            j.decoders = atoi(v), i++;
        else if (v && !strcmp(o, "--threads") && atoi(v) >= 0)
            j.threads = atoi(v), i++;
        else if (o[0] != '-' && !j.prog_path)
            j.prog_path = o;
        else {
            if (rank == 0)
                fprintf(stderr, "pxbatch: bad argument '%s'\n%s", o, px__usage);
            rc = 2;
            goto end;
        }
    }
    if (!j.prog_path || !j.out_dir || !!list == !!dir) {
        if (rank == 0)
            fprintf(stderr, "pxbatch: needs a program, --out and one of --in-list, --in-dir\n%s", px__usage);
        rc = 2;
        goto end;
    }
    pxvm_error err = {0};
    pxvm_program prog;
    if (pxvm_program_load(j.prog_path, &j.lim, &prog, &err) < 0) {
        char buf[1024];
        pxvm_error_format(&err, buf, sizeof buf);
        if (rank == 0)
            fprintf(stderr, "pxbatch: %s\n", buf);
        rc = pxvm_exit_status(err.cls);
        goto end;
    }
    int input = -1, out_slot = -1;
    for (int k = 0; k < prog.nslots; k++) {
        if (prog.slots[k].role == PXI_ROLE_INPUT && input < 0)
            input = k;
        if (prog.slots[k].role == PXI_ROLE_OUTPUT && (out_slot < 0 || (prog.slots[k].patch_count && !prog.slots[out_slot].patch_count)))
            out_slot = k;
    }
    if (input < 0 || out_slot < 0) {
        if (rank == 0)
            fprintf(stderr, "pxbatch: usage: the program needs an input slot and an output slot\n");
        pxvm_program_free(&prog);
        rc = 2;
        goto end;
    }
    if (px__inputs(&j, list, dir) < 0) {
        if (rank == 0)
            fprintf(stderr, "pxbatch: i/o error: cannot read '%s': %s\n", list ? list : dir, strerror(errno));
        pxvm_program_free(&prog);
        rc = 1;
        goto end;
    }
    mkdir(j.out_dir, 0755);
    /* workers: one per GPU of this process (without MPI), else one; each a share of the shards */
    int nworkers = 1, ndev = 0;
    if (strcmp(j.exec_name, "cpu")) {
        const pxvm_executor_ops *cuda = pxvm_executor_find("cuda", &err);
        pxvm_executor *probe = NULL;
        pxvm_open_options oo = {0, 0};
        if (cuda && cuda->open(&probe, &oo, &err) == 0) {
            ndev = 1;
            for (int d = 1; d < 64; d++) { /* count the devices that open */
                pxvm_executor *e2 = NULL;
                pxvm_open_options o2 = {0, d};
                if (cuda->open(&e2, &o2, &err) < 0) {
                    if (e2)
                        cuda->close(e2);
                    break;
                }
                cuda->close(e2);
                ndev++;
            }
        }
        if (probe)
            cuda->close(probe);
        if (j.devices && j.devices < ndev)
            ndev = j.devices;
        nworkers = size == 1 && ndev ? ndev : 1;
    }
    int gpus = ndev ? ndev : 1;
    if (!j.decoders) { /* this host's cores, shared by its workers (and its ranks) */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int per = (int)(cores / (nworkers * (size > gpus ? gpus : size)));
        j.decoders = per < 1 ? 1 : per > 64 ? 64 : per;
    }
    px__worker *ws = calloc((size_t)nworkers, sizeof *ws);
    pthread_t *th = calloc((size_t)nworkers, sizeof *th);
    double t0 = px__now();
    for (int i = 0; ws && th && i < nworkers; i++) {
        ws[i].job = &j, ws[i].prog = &prog, ws[i].input = input, ws[i].out_slot = out_slot;
        ws[i].nslots_total = size * nworkers, ws[i].slot_id = rank * nworkers + i;
        ws[i].device = size > 1 ? local_rank % gpus : i;
        ws[i].exec = j.exec_name;
        ws[i].is_rank0_first = rank == 0 && i == 0;
        pthread_create(&th[i], NULL, px__work, &ws[i]);
    }
    uint64_t tot[5] = {0, 0, 0, 0, 0}; /* images, failed, bytes in, bytes out, skipped shards */
    int worst = 0;
    for (int i = 0; ws && th && i < nworkers; i++) {
        pthread_join(th[i], NULL);
        tot[0] += ws[i].st.images, tot[1] += ws[i].st.failed, tot[2] += ws[i].st.bytes_in, tot[3] += ws[i].st.bytes_out;
        tot[4] += (uint64_t)ws[i].skipped;
        if (ws[i].rc) {
            char buf[1024];
            pxvm_error_format(&ws[i].err, buf, sizeof buf);
            fprintf(stderr, "pxbatch: rank %d worker %d: %s\n", rank, i, buf);
            if (!worst)
                worst = pxvm_exit_status(ws[i].rc);
        }
    }
    double secs = px__now() - t0;
#ifdef PXVM_HAVE_MPI
    uint64_t all[5];
    MPI_Reduce(tot, all, 5, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    int worst_all = 0;
    MPI_Allreduce(&worst, &worst_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double secs_all = 0;
    MPI_Reduce(&secs, &secs_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        memcpy(tot, all, sizeof all), secs = secs_all;
    worst = worst_all;
#endif
    if (rank == 0)
        fprintf(stderr,
                "pxbatch: %" PRIu64 " images in %.3f s (%.1f images/s) over %d process%s x %d worker%s, %" PRIu64
                " failed, %" PRIu64 " finished shards skipped, %.1f MB in, %.1f MB out\n",
                tot[0], secs, (double)tot[0] / (secs > 0 ? secs : 1), size, size > 1 ? "es" : "", nworkers,
                nworkers > 1 ? "s" : "", tot[1], tot[4], (double)tot[2] / 1e6, (double)tot[3] / 1e6);
    rc = worst ? worst : (tot[1] ? 1 : 0);
#ifdef PXVM_HAVE_MPI
    { /* every rank exits with the job's status */
        uint64_t failed = tot[1];
        MPI_Bcast(&failed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        rc = worst ? worst : (failed ? 1 : 0);
    }
#endif
    free(ws);
    free(th);
    pxvm_program_free(&prog);
    for (int i = 0; i < j.nfiles; i++)
        free(j.files[i]);
    free(j.files);
end:
#ifdef PXVM_HAVE_MPI
    MPI_Finalize();
#endif
    return rc;
}
