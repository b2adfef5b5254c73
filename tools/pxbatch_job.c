/* pxbatch_job.c - a pxbatch job's dataset and --out: the inputs in a fixed order (a list file or
 * a folder), --out checked, created, locked and cleaned, the markers already there compared with
 * this job (finished shards skipped, another job's refused), and the job object they record. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pxbatch_internal.h"

/* ---- inputs --------------------------------------------------------------------------------- */

static int px__cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The dataset, in a fixed order: a list file's lines, or a folder's images sorted by name.
 * 0, 1 (i/o) or 3 (malformed list) with msg. */
int px_batch_inputs(px_batch_job *j, const char *list, const char *dir, char *msg, size_t len)
{
    char why[256];
    if (list) {
        FILE *f = !strcmp(list, "-") ? stdin : fopen(list, "r");
        if (!f) {
            snprintf(msg, len, "i/o error: cannot read '%s': %s", list, strerror(errno));
            return 1;
        }
        int rc = pxb_list_read(f, &j->in, why, sizeof why);
        if (f != stdin)
            fclose(f);
        if (rc < 0) {
            snprintf(msg, len, "%s: '%s': %s", strstr(why, "NUL") ? "malformed" : "i/o error", list, why);
            return strstr(why, "NUL") ? 3 : 1;
        }
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(msg, len, "i/o error: cannot read '%s': %s", dir, strerror(errno));
        return 1;
    }
    size_t dl = strlen(dir);
    const char *sep = dl && dir[dl - 1] == '/' ? "" : "/";
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || e->d_name[0] == '.' ||
            (strcasecmp(dot, ".png") && strcasecmp(dot, ".jpg") && strcasecmp(dot, ".jpeg"))) {
            j->in_skipped += strcmp(e->d_name, ".") && strcmp(e->d_name, ".."); /* said once listed */
            continue;
        }
        char *path;
        if (asprintf(&path, "%s%s%s", dir, sep, e->d_name) < 0 || pxb_names_add(&j->in, path) < 0) {
            closedir(d);
            snprintf(msg, len, "i/o error: out of memory listing '%s'", dir);
            return 1;
        }
        free(path);
    }
    closedir(d);
    if (j->in.n)
        qsort(j->in.v, j->in.n, sizeof(char *), px__cmp);
    return 0;
}

/* ---- --out: checked, locked, compared with this job ------------------------------------------- */

/* --out exists or is created, is a directory, takes new files, and is locked (flock on
 * DIR/.pxbatch.lock, held until the process exits). *created: what this made (1 the folder, 2 the
 * lock file). 0, or an exit status with msg. */
int px_batch_out_prepare(const char *dir, int *lock_fd, int *created, char *msg, size_t len)
{
    struct stat st;
    *created = 0;
    /* mkdir's EEXIST: another run made it just now (then its lock decides between the two) */
    if (stat(dir, &st) != 0 &&
        (errno != ENOENT || (mkdir(dir, 0777) != 0 ? errno != EEXIST : (*created = 1, 0)) || stat(dir, &st) != 0)) {
        int parent = errno == ENOENT; /* mkdir makes one level: its folder is not there */
        snprintf(msg, len, "i/o error: --out '%s': cannot create it: %s%s", dir, strerror(errno),
                 parent ? " (pxbatch makes the last folder only: create the ones above it first)" : "");
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(msg, len, "i/o error: --out '%s' is not a directory", dir);
        return 1;
    }
    char *probe = NULL, *lock = NULL;
    if (asprintf(&probe, "%s/.pxbatch-probe-XXXXXX", dir) < 0 || asprintf(&lock, "%s/.pxbatch.lock", dir) < 0) {
        free(probe);
        snprintf(msg, len, "i/o error: out of memory");
        return 1;
    }
    int rc = 0, fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(msg, len, "i/o error: --out '%s' is not writable: %s", dir, strerror(errno));
        rc = 1;
    } else {
        close(fd);
        unlink(probe);
        /* The lock is the file at the path now: a run that fails unlinks its lock file while
         * holding it (px_batch_out_unmake), so a file opened just before that and locked after
         * is no longer the path's, and a third run may be holding a new one. After flock, the
         * locked file must still be the path's (fstat vs lstat), else open it again. */
        for (int tries = 0;; tries++) {
            int made = 0;
            fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
            if (fd >= 0)
                made = 1;
            else if (errno == EEXIST)
                fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0 && errno == ENOENT && tries < 100)
                continue; /* unlinked between the two opens */
            if (fd < 0) {
                snprintf(msg, len, "i/o error: cannot open the lock '%s': %s", lock, strerror(errno));
                rc = 1;
                break;
            }
            if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
                int e = errno;
                if (e == EWOULDBLOCK)
                    snprintf(msg, len,
                             "usage: another pxbatch run (or --verify) holds --out '%s' (its lock .pxbatch.lock): "
                             "refusing to run beside it",
                             dir);
                else
                    snprintf(msg, len, "i/o error: cannot lock '%s': %s", lock, strerror(e));
                rc = e == EWOULDBLOCK ? 2 : 1;
                close(fd); /* one made here stays: the run holding it opened it (its unmake removes it) */
                break;
            }
            struct stat held, now;
            if (fstat(fd, &held) == 0 && lstat(lock, &now) == 0 && held.st_dev == now.st_dev &&
                held.st_ino == now.st_ino) {
                *created |= made ? 2 : 0;
                *lock_fd = fd;
                break;
            }
            close(fd); /* an unlinked lock (or replaced): try the path's again */
            if (tries >= 100) {
                snprintf(msg, len, "i/o error: cannot lock '%s': it is replaced again and again", lock);
                rc = 1;
                break;
            }
        }
    }
    free(probe);
    free(lock);
    return rc;
}

void px_batch_out_unmake(const char *dir, int created)
{
    char *lock = NULL;
    if ((created & 2) && asprintf(&lock, "%s/.pxbatch.lock", dir) >= 0)
        unlink(lock); /* while still held: no other run can be holding it */
    free(lock);
    if (created & 1)
        rmdir(dir); /* only if empty: never what another process put there */
}

/* Under the lock: with --overwrite every shard file goes, else the temporary files a killed run
 * left (SIGKILL cannot be caught). 0, or 1 with msg. */
int px_batch_out_clean(const px_batch_job *j, char *msg, size_t len)
{
    DIR *d = opendir(j->out_dir);
    if (!d) {
        snprintf(msg, len, "i/o error: cannot read --out '%s': %s", j->out_dir, strerror(errno));
        return 1;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        int named = !strncmp(e->d_name, "shard-", 6), tmp = named && strstr(e->d_name, ".tmp-");
        int ours = pxb_shard_name(e->d_name, "npy") >= 0 || pxb_shard_name(e->d_name, "json") >= 0 ||
                   pxb_shard_name(e->d_name, "offsets.npy") >= 0 || pxb_shard_name(e->d_name, "grid.npy") >= 0;
        /* --overwrite: every shard-* file, also those not named as pxbatch names its own
         * (shard-99.npy, a .bak), which the readers and --verify refuse beside shards */
        struct stat st;
        int stray = named && !ours && j->overwrite && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    !S_ISDIR(st.st_mode);
        if (!tmp && !(ours && j->overwrite) && !stray)
            continue;
        char *path;
        if (asprintf(&path, "%s/%s", j->out_dir, e->d_name) < 0)
            continue;
        if (unlink(path) != 0 && errno != ENOENT && !rc) {
            snprintf(msg, len, "i/o error: cannot remove '%s': %s", path, strerror(errno));
            rc = 1;
        }
        free(path);
    }
    closedir(d);
    return rc;
}

/* The failed inputs of a finished shard that this run skips, on stderr as a run tells its own
 * (the summary counts them): a rerun names them again, not only in the marker. */
static void px__tell_earlier_failures(pxb_marker *m, int shard)
{
    json_t *errors = json_object_get(m->root, "errors");
    for (size_t k = 0; k < json_array_size(errors); k++) {
        json_t *e = json_array_get(errors, k);
        char *name = pxb_json_get_name(e, "file");
        const char *why = json_string_value(json_object_get(e, "error"));
        char head[64];
        snprintf(head, sizeof head, "failed (shard-%05d, an earlier run)", shard);
        px_batch_tell_input("", head, name ? name : "?", why ? why : "?");
        free(name);
    }
}

/* A finished shard's marker compared with this job: 0 (done[] set when its .npy is there whole;
 * else the shard is made again), or an exit status with msg: 2 another job's, 3 not a marker. */
static int px__check_marker(px_batch_job *j, json_t *job, int shard, uint64_t *failed, uint64_t *skipped, char *msg,
                            size_t len)
{
    pxb_marker m;
    char why[512], diff[2048];
    if (pxb_marker_load(j->out_dir, shard, &m, why, sizeof why) < 0) {
        snprintf(msg, len, "malformed: --out '%s': shard-%05d: %s; remove it or rerun with --overwrite", j->out_dir,
                 shard, why);
        return 3;
    }
    int rc = 0;
    if (pxb_job_diff(m.job, job, diff, sizeof diff)) {
        char *was = pxb_json_get_name(m.root, "program");
        /* the hash is of the program as it runs, which the same file need not be: say so */
        const char *what = strstr(diff, "program_sha256") ?
            " (program_sha256 is the SHA-256 of the program image as it runs: for an any-size program under --policy "
            "stretch or fit, of its resolution at the reference size or at --size, under native of the program itself; "
            "so the same file under another --policy or --size has another)" : "";
        snprintf(msg, len,
                 "usage: --out '%s' holds the shards of another job: shard-%05d.json (made from '%s') differs from "
                 "this run in %s%s; rerun with that job's options to go on with it, with --overwrite to replace "
                 "them, or use another --out",
                 j->out_dir, shard, was ? was : "?", diff, what);
        free(was);
        rc = 2;
    } else if (shard >= j->nshards) {
        snprintf(msg, len, "usage: --out '%s' holds shard-%05d.json, past this job's %d shards: remove it or rerun "
                           "with --overwrite", j->out_dir, shard, j->nshards);
        rc = 2;
    } else {
        char *npy = px_batch_shard_path(j, shard, "npy");
        char *ofs = m.ragged ? px_batch_shard_path(j, shard, "offsets.npy") : NULL;
        char *grd = m.ragged ? px_batch_shard_path(j, shard, "grid.npy") : NULL;
        struct stat st, so, sg;
        int index_ok = !m.ragged || (ofs && grd && stat(ofs, &so) == 0 && S_ISREG(so.st_mode) &&
                                     (uint64_t)so.st_size == m.offsets_bytes && stat(grd, &sg) == 0 &&
                                     S_ISREG(sg.st_mode) && (uint64_t)sg.st_size == m.grid_bytes);
        free(ofs);
        free(grd);
        /* --retry-failed: a shard with failed inputs is made again (its files replaced as any
         * shard's are), the others are skipped */
        if (index_ok && npy && stat(npy, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == m.npy_bytes &&
            !(j->retry_failed && m.nerrors)) {
            j->done[shard] = 1;
            *failed += m.nerrors;
            (*skipped)++;
            px__tell_earlier_failures(&m, shard);
        }
        free(npy);
    }
    pxb_marker_free(&m);
    return rc;
}

/* This process's share of the markers already in --out (shards s with s mod ranks == rank; rank 0
 * also any past this job's shards): each of this job, or the run refuses. */
int px_batch_scan(px_batch_job *j, json_t *job, int rank, int size, uint64_t *failed, uint64_t *skipped, char *msg,
                    size_t len)
{
    DIR *d = opendir(j->out_dir);
    if (!d) {
        snprintf(msg, len, "i/o error: cannot read --out '%s': %s", j->out_dir, strerror(errno));
        return 1;
    }
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        int s = pxb_shard_name(e->d_name, "json");
        if (s >= 0 && (s < j->nshards ? s % size == rank : rank == 0))
            rc = px__check_marker(j, job, s, failed, skipped, msg, len);
    }
    closedir(d);
    return rc;
}

/* The job: every field that decides the output bytes. A rerun into the same --out compares them
 * all (pxb_job_diff), so an option that comes to change the bytes (a dtype, fixations) is added
 * here and is compared from then on. --policy is "policy", its canonical text (px_policy_format, or
 * "native";
 * a marker written before the field existed has none: pxb_job_diff reads that as "exact"); --size
 * is "size" [W, H], only when given (a job without it binds images otherwise: a field of its own
 * in a mismatch). Not
 * in it: the executor, threads, devices, decoders and ranks (the same bytes: tested), the
 * program's path (the same pixels from another file, or a plan and its .pxi, are the same
 * program) and --max-memory (it bounds the batch and decides which error an input gets, not the
 * bytes of one that fits its slot). */
json_t *px_batch_job_json(const px_batch_job *j, const pxvm_program *prog, int input, int out_slot)
{
    char prog_sha[65], in_sha[65], la[16], lb[16], policy[96];
    pxb_sha256_of(prog->image.px, (size_t)prog->image.w * (size_t)prog->image.h * 4u, prog_sha);
    pxb_sha256 c;
    pxb_sha256_init(&c);
    for (size_t i = 0; i < j->in.n; i++)
        pxb_sha256_update(&c, j->in.v[i], strlen(j->in.v[i]) + 1);
    pxb_sha256_hex(&c, in_sha);
    if (j->native)
        snprintf(policy, sizeof policy, "native");
    else
        px_policy_format(&j->policy, policy, sizeof policy);
    json_t *job = json_pack("{s:s, s:s, s:[i,i], s:s, s:s, s:i, s:I, s:s, s:s}", "pxvm_version", PXVM_VERSION,
                            "program_sha256", prog_sha, "program_size", prog->image.w, prog->image.h, "input_slot",
                            pxvm_slot_label(prog, input, la), "output_slot", pxvm_slot_label(prog, out_slot, lb),
                            "shard_size", j->shard_size, "inputs", (json_int_t)j->in.n, "inputs_sha256", in_sha,
                            "policy", policy);
    if (job && j->size.text && json_object_set_new(job, "size", json_pack("[i,i]", j->size.w, j->size.h)) < 0) {
        json_decref(job);
        return NULL;
    }
    /* --lenient: a damaged input gives rows instead of an error; only when given, as --size */
    if (job && (j->lim.flags & PXVM_DECODE_LENIENT) && json_object_set_new(job, "decode", json_string("lenient")) < 0) {
        json_decref(job);
        return NULL;
    }
    /* --exif-transpose: the inputs turned upright: other rows; only when given */
    if (job && (j->lim.flags & PXVM_DECODE_EXIF_TRANSPOSE) &&
        json_object_set_new(job, "exif_transpose", json_true()) < 0) {
        json_decref(job);
        return NULL;
    }
    return job;
}
