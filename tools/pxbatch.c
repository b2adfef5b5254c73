/* pxbatch - a program over a dataset, in shards: under mpirun one process per GPU (or per CPU
 * executor), each taking its share of the shards; without MPI one process, two workers a GPU.
 * Each shard is written all-or-nothing (patches .npy, then its marker .json, which records the
 * job that made it and the .npy's SHA-256), so a rerun of the same job skips finished shards and
 * a rerun of another job into the same --out refuses; an input that fails to decode or bind is
 * listed in its shard's errors and does not stop the job. Decoding the next shard overlaps the
 * run of the current one (host threads). --out is locked for the run. Built with MPI when mpicc
 * is present. Here: the usage, the options and main; the job and --out are in pxbatch_job.c, a
 * shard decoded in pxbatch_decode.c and run in pxbatch_shard.c, the workers and ranks in
 * pxbatch_workers.c, --stats in pxbatch_stats.c (pxbatch_internal.h: what they share); file handling (markers, the list,
 * --verify) is behind pxbatch.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef PXVM_HAVE_MPI
#include <mpi.h>
#endif

#include <jansson.h>

#include "../api/fixation.h"
#include "../assembler/plan.h"
#include "../vm/resize.h"
#include "../vm/vm.h"
#include "../executors/registry.h"
#include "args.h"
#include "pxbatch.h"
#include "pxbatch_internal.h"

static const char px__usage[] =
    "usage: pxbatch PROGRAM.pxi|PLAN.json (--in-list FILE | --in-dir DIR) --out DIR [options]\n"
    "       pxbatch --verify DIR\n"
    "       pxbatch --version         the version and the executors built in\n"
    "  --shard-size N            images per shard, 1..4096 (default 64)\n"
    "  --executor cpu|cuda|auto  (default auto: cuda when it works here)\n"
    "  --devices N               CUDA devices to use without MPI, 1..64 (default: all); under\n"
    "                            mpirun each rank takes device (local rank mod devices)\n"
    "  --threads N               CPU worker threads per process, 0..1024 (default 0: all cores)\n"
    "  --workers N               workers per process, 1..64, each with its own executor and its\n"
    "                            share of the shards; worker i takes CUDA device (local rank x N\n"
    "                            + i) mod devices, so several can share one GPU (default: two per\n"
    "                            device without MPI: one runs while the other waits on its inputs\n"
    "                            or its writer; else one)\n"
    "  --decoders N              decoding threads per worker, 1..64 (default: the cores this\n"
    "                            process may run on / (workers x ranks on this host)): one pool of\n"
    "                            workers x N threads a process (at most one an input), shared by\n"
    "                            its workers, decoding the inputs in the order they run (the\n"
    "                            oldest shard's first), ahead of the workers as far as\n"
    "                            --max-memory / 2 of decoded inputs waiting allows\n"
    "  --stats FILE              where the time went, as JSON written after the run (by rank 0):\n"
    "                            the setup before the workers (MPI, the program, the inputs, the\n"
    "                            devices counted); per worker and in total, wall seconds, opening\n"
    "                            the executor; decoding its inputs (summed over the decoders), the\n"
    "                            worker waiting for decoded images, in the executor, writing\n"
    "                            shards; per process's decode pool, its decoders' seconds decoding\n"
    "                            (the decoders busy on average), idle and held back by --max-memory\n"
    "                            / 2, and the seconds a worker waited while every decoder decoded,\n"
    "                            one was held back, or what it waited for was decoding\n"
    "  --policy POLICY           how an image of another size than the input slot meets it, as\n"
    "                            pxrun's: native (an any-size input takes each image at its own\n"
    "                            size, within its bounds: the default for any-size programs; the\n"
    "                            program resolved per size, each size in a shard one batch; an\n"
    "                            image outside the bounds fails, naming the file, its size and\n"
    "                            them; an error for a fixed-size program), exact (the default for\n"
    "                            fixed-size programs: another size fails, naming the file; with an\n"
    "                            any-size program the same as native),\n"
    "                            stretch[:FILTER], fit[:FILTER][:PAD] or crop[:short=S][:FILTER]\n"
    "                            (resized on the decoding threads; FILTER nearest, box, bilinear,\n"
    "                            hamming, bicubic (default), lanczos; PAD R,G,B[,A] or RRGGBB[AA],\n"
    "                            default 0,0,0,255; crop: the short side to S, default the slot's\n"
    "                            larger side, then the centre cut, CLIP's: docs/policies.md), or\n"
    "                            dynamic[:patch=P,merge=M,min=PIXELS,max=PIXELS][:FILTER] with a\n"
    "                            \"uniform\" plan: each image resized to its own size (sides multiples\n"
    "                            of patch x merge, area in min..max: Qwen2-VL's rule) and cut into\n"
    "                            its patch x patch tiles (the plan's tokens at that size) by the\n"
    "                            executor, many images of many sizes in one call, while the next\n"
    "                            ones decode (see --decoders: decoded images waiting are held\n"
    "                            within --max-memory / 2 together, besides the images decoding);\n"
    "                            ragged shards (below)\n"
    "  --size WxH                an any-size program: the size every image is bound at (within the\n"
    "                            input's bounds): each image brought to W x H by --policy\n"
    "                            stretch[:FILTER] (the default with --size) or fit[:FILTER][:PAD],\n"
    "                            the program resolved once at W x H (pxrun --size's bytes); an error\n"
    "                            with a fixed-size program and with native, exact or dynamic\n"
    "  --max-memory BYTES        one input file and its decoded image, the program's slots, and a\n"
    "                            worker's batch (shard size x (slots + 2 decoded inputs + 2 outputs))\n"
    "                            (default 256 MiB per core of this process's share of the host, at\n"
    "                            least 4 GiB and at most a quarter of its memory: pxrun's 1 GiB is\n"
    "                            one image; half of this holds the next shards decoded, see\n"
    "                            --decoders)\n"
    "  --max-side N              the largest side of an input or slot, 1..65535 (default 16384, as\n"
    "                            pxrun): a wider panorama fails with a pointer here\n"
    "  --lenient                 decode damaged inputs as far as the decoder can, as pxrun --lenient\n"
    "                            (a truncated JPEG's missing rows grey, corrupt data; a truncated\n"
    "                            PNG's rows that arrived, the rest zero, as Pillow's\n"
    "                            LOAD_TRUNCATED_IMAGES), each named on stderr (pxbatch: warning\n"
    "                            (--lenient): malformed: 'FILE': ...); without it a damaged input\n"
    "                            fails.\n"
    "                            Bytes after a complete image (after a PNG's IEND, a JPEG's\n"
    "                            end-of-image marker) are no damage: read in both modes. Part of\n"
    "                            the job (\"decode\": \"lenient\" in the markers)\n"
    "  --exif-transpose          decode each input with its EXIF orientation applied, as Pillow's\n"
    "                            ImageOps.exif_transpose (phone photos upright). Part of the job\n"
    "                            (\"exif_transpose\": true in the markers)\n"
    "  --overwrite               remove every shard (and marker) in --out first: another job's too\n"
    "  --retry-failed            make again the finished shards whose inputs failed (after fixing or\n"
    "                            replacing those files); the others are skipped as on any rerun\n"
    "  --verify DIR              check every shard of DIR against its marker\n"
    "Writes DIR/shard-NNNNN.npy ((rows, patches, h, w, 4) uint8: the program's first patch atlas,\n"
    "or (rows, 1, H, W, 4) of its first output) and DIR/shard-NNNNN.json (the job that made it, the\n"
    ".npy's size and SHA-256, file -> row, and the files that failed with their pxvm error); each\n"
    "failed file is named on stderr too (pxbatch: failed: 'FILE': ERROR), a rerun's skipped ones also.\n"
    "With --policy dynamic a shard is ragged: DIR/shard-NNNNN.npy is (tokens, p, p, 4), the tokens\n"
    "of its images one after the other, DIR/shard-NNNNN.offsets.npy (rows + 1) int64 (row r is\n"
    "tokens offsets[r] .. offsets[r + 1] - 1) and DIR/shard-NNNNN.grid.npy (rows, 3) int64 (t, h, w\n"
    "in patches); the marker records both files' sizes and SHA-256, and each row's sizes.\n"
    "Finished shards of the same job are skipped on a rerun; another job's refuse (see --overwrite).\n"
    "Only regular files are read as inputs. DIR/.pxbatch.lock is held for the run. A program that\n"
    "samples relative to a fixation register is refused (pxbatch gives no fixation).\n"
    "Exit status: 0 all images done, 9 done but inputs failed (each listed in its shard's errors,\n"
    "this run's or an earlier one's), 1 i/o (--out or a list not usable, a shard not written),\n"
    "2 usage (options, --max-memory, --out of another job or held by another run), 3 malformed\n"
    "(the program, a marker), 4 invalid, 5 unlinkable, 6 trap, 7 unavailable, 8 plan (as pxrun).\n"
    "Ctrl-C (SIGINT) or SIGTERM ends it after a line saying so, as the signal does (130, 143).\n"
    "--verify: 0 every shard good, 1 a shard corrupt, missing or orphaned, 2 a run holds DIR.\n";

/* ---- the command ------------------------------------------------------------------------------ */

static int px__ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* A .pxi, or a plan (.json) compiled here, as pxrun does. --policy dynamic needs a "uniform" plan:
 * its tokens are the tiles of each resized image (pxvm_runner_ragged's), and its patch completes
 * the policy; the program, at the plan's own size, is what the job's program_sha256 records. */
static int px__load_program(px_batch_job *j, pxvm_program *prog, pxvm_error *err)
{
    const char *path = j->prog_path;
    int dynamic = j->policy.kind == PX_POLICY_DYNAMIC;
    if (!px__ends_with(path, ".json")) {
        if (dynamic)
            return pxvm_fail(err, PXE_BATCH_DYNAMIC_NOT_PLAN, -1, -1, path);
        return pxvm_program_load(path, &j->lim, prog, err);
    }
    uint8_t *data;
    size_t len;
    if (pxvm_read_file(path, 1u << 24, &data, &len, err) < 0)
        return -1;
    pxvm_plan plan;
    if (pxvm_plan_parse((const char *)data, len, path, &plan, err) < 0) {
        free(data);
        return -1;
    }
    int uniform = !strcmp(plan.scheme, "uniform"), patch = plan.patch;
    j->uniform_plan = uniform; /* also named by an exact job's size refusals */
    if (dynamic && !uniform)
        pxvm_fail(err, PXE_BATCH_DYNAMIC_SCHEME, -1, -1, path, plan.scheme);
    pxvm_plan_free(&plan);
    if (dynamic) {
        if (!uniform || px_policy_dynamic_patch(&j->policy, patch, err) < 0) {
            free(data);
            return -1;
        }
        px_policy_format(&j->policy, j->ragged_policy, sizeof j->ragged_policy);
    }
    pxvm_image img;
    int rc = pxvm_plan_image((const char *)data, len, path, 0, &img, err);
    free(data);
    return rc < 0 ? -1 : pxvm_program_from_image(&img, &j->lim, prog, err);
}

/* "pxbatch: usage: ...", then the options (`full`) or where to find them */
static int px__usage_error(int rank, int full, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int px__usage_error(int rank, int full, const char *fmt, ...)
{
    if (rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "pxbatch: usage: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n%s", full ? px__usage : "(pxbatch --help lists the options)\n");
        va_end(ap);
    }
    return 2;
}

/* Options: 0, or 2 (usage, printed by rank 0). */
static int px__args(int argc, char **argv, int rank, px_batch_job *j, const char **list, const char **dir,
                    const char **verify)
{
    const char *policy = NULL;
    static const struct {
        const char *name;
        uint64_t lo, hi;
    } nums[] = {{"--shard-size", 1, 4096}, {"--devices", 1, 64},    {"--decoders", 1, 64},
                {"--threads", 0, 1024},    {"--max-memory", 1, INT64_MAX}, {"--workers", 1, 64},
                {"--max-side", 1, 65535}};
    const char *number = NULL, *devices = NULL; /* the last numeric option given; --devices' value */
    int seen[32], nseen = 0; /* argv index of each option given with its value (fewer than 32 kinds) */
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--overwrite")) {
            j->overwrite = 1;
            continue;
        }
        if (!strcmp(o, "--retry-failed")) {
            j->retry_failed = 1;
            continue;
        }
        if (!strcmp(o, "--lenient")) {
            j->lim.flags |= PXVM_DECODE_LENIENT;
            continue;
        }
        if (!strcmp(o, "--exif-transpose")) {
            j->lim.flags |= PXVM_DECODE_EXIF_TRANSPOSE;
            continue;
        }
        if (o[0] != '-' || !strcmp(o, "-")) {
            if (j->prog_path)
                return px__usage_error(rank, 0, "more than one program ('%s', then '%s')", j->prog_path, o);
            j->prog_path = o;
            continue;
        }
        const char **str = !strcmp(o, "--in-list") ? list : !strcmp(o, "--in-dir") ? dir
                           : !strcmp(o, "--out")     ? &j->out_dir
                           : !strcmp(o, "--executor") ? &j->exec_name
                           : !strcmp(o, "--verify")   ? verify
                           : !strcmp(o, "--policy")   ? &policy
                           : !strcmp(o, "--stats")    ? &j->stats_path
                                                      : NULL;
        size_t k = 0;
        while (!str && k < sizeof nums / sizeof nums[0] && strcmp(o, nums[k].name))
            k++;
        int size = !str && !strcmp(o, "--size");
        if (!str && !size && k == sizeof nums / sizeof nums[0])
            return px__usage_error(rank, 0, "unknown option '%s'", o);
        if (!v)
            return px__usage_error(rank, 0, "%s needs a value", o);
        i++;
        for (int e = 0; e < nseen; e++) /* every option takes one value: given twice, never the last silently */
            if (!strcmp(argv[seen[e]], o))
                return px__usage_error(rank, 0, "%s given twice ('%s', then '%s'): give it once", o, argv[seen[e] + 1], v);
        if (nseen < 32)
            seen[nseen++] = i - 1;
        if (size) {
            pxvm_error serr;
            if (px_size_parse(v, &j->size, &serr) < 0)
                return px__usage_error(rank, 0, "%s", serr.msg);
            continue;
        }
        if (str) {
            *str = v;
            pxvm_error perr;
            if (str == &policy) { /* native is pxbatch's and pxrun's, not the library's resize policy */
                if (px_policy_option(v, &j->policy, &j->native, &perr) < 0)
                    return px__usage_error(rank, 0, "%s", perr.msg);
            }
            continue;
        }
        uint64_t n;
        if (pxb_parse_u64(v, nums[k].lo, nums[k].hi, &n) < 0)
            return px__usage_error(rank, 0, "%s takes a whole number %" PRIu64 "..%" PRIu64 ", not '%s'", o, nums[k].lo,
                                   nums[k].hi, v);
        number = o;
        if (k == 0)
            j->shard_size = (int)n;
        else if (k == 1)
            j->devices = (int)n, devices = v;
        else if (k == 2)
            j->decoders = (int)n;
        else if (k == 3)
            j->threads = (int)n;
        else if (k == 4)
            j->lim.max_memory = n;
        else if (k == 5)
            j->workers = (int)n;
        else
            j->lim.max_side = (uint32_t)n;
    }
    j->policy_given = policy != NULL;
    if (*verify) {
        /* the options of a job, each named in the refusal (the first given; --overwrite when only
         * a program, --out, inputs or --policy are) */
        const struct { int given; const char *name; } job_only[] = {
            {number != NULL, number},
            {j->size.text != NULL, "--size"},
            {(j->lim.flags & PXVM_DECODE_LENIENT) != 0, "--lenient"},
            {j->stats_path != NULL, "--stats"},
            {j->retry_failed, "--retry-failed"},
            {(j->lim.flags & PXVM_DECODE_EXIF_TRANSPOSE) != 0, "--exif-transpose"},
            {j->overwrite, "--overwrite"}};
        const char *named = NULL;
        for (size_t k = 0; k < sizeof job_only / sizeof job_only[0] && !named; k++)
            named = job_only[k].given ? job_only[k].name : NULL;
        if (named || j->prog_path || j->out_dir || *list || *dir || policy)
            return px__usage_error(rank, 0, "--verify DIR takes no program, --out, inputs, --policy or %s",
                                   named ? named : "--overwrite");
        return 0;
    }
    pxvm_error serr;
    if (px_size_policy(&j->size, policy, j->native, &j->policy, &serr) < 0)
        return px__usage_error(rank, 0, "%s", serr.msg);
    if (*list && *dir)
        return px__usage_error(rank, 0, "--in-list '%s' and --in-dir '%s' exclude each other: give one", *list, *dir);
    if (j->overwrite && j->retry_failed)
        return px__usage_error(rank, 0, "--retry-failed would do nothing with --overwrite, which makes every shard "
                                        "again: give one");
    if (!j->prog_path || !j->out_dir || (!*list && !*dir))
        return px__usage_error(rank, 0, "needs a program, --out and one of --in-list, --in-dir (%s missing)",
                               !j->prog_path ? "the program is" : !j->out_dir ? "--out is" : "the inputs are");
    if (strcmp(j->exec_name, "cpu") && strcmp(j->exec_name, "cuda") && strcmp(j->exec_name, "auto"))
        return px__usage_error(rank, 0, "--executor takes cpu, cuda or auto, not '%s'", j->exec_name);
    if (devices && !strcmp(j->exec_name, "cpu")) /* an option that would do nothing */
        return px__usage_error(rank, 0, "--devices %s: CUDA devices, but --executor is cpu", devices);
    return 0;
}

/* a * b + c, saturating */
static uint64_t px__mad(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r) ? UINT64_MAX : r;
}

/* 0 when --stats FILE can be written after the run (its folder exists and takes files; the file,
 * if there, is a writable regular file), else 1 (i/o, as --out's) with the reason in msg. Nothing
 * is created: a run that fails before the end leaves no empty stats file. */
static int px__stats_writable(const char *path, char *msg, size_t len)
{
    struct stat st;
    char *copy = strdup(path);
    const char *why = NULL;
    if (!copy)
        why = "out of memory";
    else if (stat(path, &st) == 0)
        why = !S_ISREG(st.st_mode) ? "not a regular file" : access(path, W_OK) != 0 ? strerror(errno) : NULL;
    else if (errno != ENOENT)
        why = strerror(errno);
    else {
        const char *folder = dirname(copy);
        why = stat(folder, &st) != 0 ? strerror(errno)
              : !S_ISDIR(st.st_mode) ? "its folder is not a directory"
              : access(folder, W_OK | X_OK) != 0 ? strerror(errno)
                                                : NULL;
    }
    if (why)
        snprintf(msg, len, "i/o error: --stats '%s': cannot write it (%s)", path, why);
    free(copy);
    return why ? 1 : 0;
}

/* The memory this process may use: the host's, or its cgroup's limit (cgroup v2) when lower. */
static uint64_t px_batch_host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t mem = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r"); /* "max" or a number of bytes */
    unsigned long long lim;
    if (f && fscanf(f, "%llu", &lim) == 1 && lim > 0 && (!mem || lim < mem))
        mem = lim;
    if (f)
        fclose(f);
    return mem;
}

/* SIGINT, SIGTERM: what stays and how to go on, said once (by rank 0, on a line of its own after
 * the progress line), then the default action. A rerun removes the temporary files a shard being
 * written leaves. */
static volatile sig_atomic_t px__say_on_signal = 1;

static void px__on_signal(int sig)
{
    static const char msg[] = "\npxbatch: interrupted: the shards written are kept; the same command again "
                              "resumes (and removes what this run left half-written)\n";
    if (px__say_on_signal) {
        px__say_on_signal = 0;
        ssize_t k = write(2, msg, sizeof msg - 1);
        (void)k;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* --max-memory's default for one of `ranks` processes on this host (see its use). */
static uint64_t px_batch_default_memory(int ranks)
{
    uint64_t r = (uint64_t)(ranks > 0 ? ranks : 1), mem = px_batch_host_memory(), floor = 4ull << 30;
    uint64_t share = (uint64_t)px_batch_cores() / r;
    uint64_t want = (share ? share : 1) << 28, quarter = mem ? mem / 4u / r : floor;
    if (want > quarter)
        want = quarter;
    return want > floor ? want : floor;
}

int main(int argc, char **argv)
{
    double began = px_batch_now();
    int rank = 0, size = 1, local_rank = 0, local_size = 1;
#ifdef PXVM_HAVE_MPI
    if ((px_batch_mpi = px_batch_launched())) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Comm local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &local_rank);
        MPI_Comm_size(local, &local_size);
        MPI_Comm_free(&local);
    }
#endif
    signal(SIGPIPE, SIG_IGN);
    px__say_on_signal = rank == 0;
    signal(SIGINT, px__on_signal);
    signal(SIGTERM, px__on_signal);
    px_batch_job j;
    memset(&j, 0, sizeof j);
    j.shard_size = 64;
    j.exec_name = "auto";
    pxvm_limits_default(&j.lim);
    /* pxrun's 1 GiB is one image; a batch holds the next shards decoded for every worker (half of
     * it, the decode pool's bound): 256 MiB per core of this process's share of the host (its
     * decoders), 4 GiB at least, a quarter of the host's memory at most. At 1 GiB that bound, not
     * the decoders, held one H200 fed by 16 cores back (results/pxbatch-memory-h200.md), and at
     * 4 GiB 32 decoders of one process waited 30 s for it (results/pxbatch-scaling-h200x2.md) */
    j.lim.max_memory = px_batch_default_memory(local_size);
#ifdef PXVM_HAVE_MPI
    if (px_batch_mpi) /* one limit for every rank (hosts differ): it decides which inputs fail */
        MPI_Allreduce(MPI_IN_PLACE, &j.lim.max_memory, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
#endif
    const char *list = NULL, *dir = NULL, *verify = NULL;
    int rc = 0, lock_fd = -1, have_prog = 0, input = -1, out_slot = -1;
    int out_created = 0;   /* rank 0: what px_batch_out_prepare made (removed if the run fails before a shard) */
    uint64_t written = 0;  /* shards this run wrote (rank 0: all ranks') */
    json_t *job = NULL;
    char msg[4096];
    pxvm_program prog;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || !strcmp(argv[i], "--version")) {
            if (rank == 0 && argv[i][2] == 'v')
                px_print_version("pxbatch");
            else if (rank == 0)
                fputs(px__usage, stdout);
            goto end;
        }
    if ((rc = px__args(argc, argv, rank, &j, &list, &dir, &verify)))
        goto end;
    if (verify) {
        rc = px_batch_from_root(rank == 0 ? pxb_verify(verify, stdout) : 0);
        goto end;
    }
    pxvm_error err = {0};
    if (px__load_program(&j, &prog, &err) < 0) {
        char buf[1024];
        pxvm_error_format(&err, buf, sizeof buf);
        if (rank == 0)
            fprintf(stderr, "pxbatch: %s\n", buf);
        rc = pxvm_exit_status(err.cls);
        goto end;
    }
    have_prog = 1;
    /* an any-size program: native (each image at its own size) unless --policy says otherwise,
     * as pxrun; exact is native there too (the program takes every size within its bounds, so an
     * image is bound as it is: pxrun's meaning); with stretch or fit it is resolved once at its
     * reference size, which the images are resized to (executors load only fixed programs) */
    if (prog.any_size && !j.size.text && (!j.policy_given || (!j.native && j.policy.kind == PX_POLICY_EXACT)))
        j.native = 1;
    int size_wh[2 * (PXVM_MAX_SLOTS + 1)] = {0}; /* --size: the any-size inputs' size */
    if (px_size_slots(&prog, j.prog_path, &j.size, size_wh, &err) < 0) { /* a fixed program, or out of bounds */
        px__usage_error(rank, 0, "%s", err.msg);
        rc = 2;
        goto end;
    }
    if (j.native && !prog.any_size) {
        px__usage_error(rank, 0, "--policy native: program '%s' is not any-size; use fit or stretch", j.prog_path);
        rc = 2;
        goto end;
    }
    if (prog.any_size && !j.native) { /* at --size, else at the reference size */
        pxvm_program res;
        if (pxvm_program_resolve(&prog, size_wh, &j.lim, &res, &err) < 0) {
            char buf[1024];
            pxvm_error_format(&err, buf, sizeof buf);
            if (rank == 0)
                fprintf(stderr, "pxbatch: %s\n", buf);
            rc = pxvm_exit_status(err.cls);
            goto end;
        }
        pxvm_program_free(&prog);
        prog = res;
    }
    for (int k = 0; k < prog.nslots; k++) {
        if (prog.slots[k].role == PXI_ROLE_INPUT && input < 0)
            input = k;
        if (prog.slots[k].role == PXI_ROLE_OUTPUT && (out_slot < 0 || (prog.slots[k].patch_count && !prog.slots[out_slot].patch_count)))
            out_slot = k;
    }
    int ninputs = 0; /* pxbatch binds one input: a second would fail in every worker ("not bound") */
    for (int k = 0; k < prog.nslots; k++)
        ninputs += prog.slots[k].role == PXI_ROLE_INPUT;
    if (ninputs > 1) {
        char lb[16], lb2[16];
        int second = input + 1;
        while (prog.slots[second].role != PXI_ROLE_INPUT)
            second++;
        px__usage_error(rank, 0, "program '%s' has %d input slots (%d '%s', %d '%s', ...): pxbatch binds one input, "
                        "each file to the first; run it with pxrun --in SLOT=FILE for each", j.prog_path, ninputs, input,
                        pxvm_slot_label(&prog, input, lb), second, pxvm_slot_label(&prog, second, lb2));
        rc = 2;
        goto end;
    }
    if (input < 0 || out_slot < 0) {
        px__usage_error(rank, 0, "the program needs an input slot and an output slot");
        rc = 2;
        goto end;
    }
    { /* never silently wrong: a program that samples relative to a fixation register would run
       * around (0, 0), as pxbatch gives no fixation */
        unsigned regs = pxvm_fixation_inputs(&prog, NULL);
        if (regs) {
            int r = __builtin_ctz(regs);
            px__usage_error(rank, 0,
                            "program '%s' samples relative to fixation register %d: pxbatch gives no fixation; "
                            "compile the plan with an absolute fixation",
                            j.prog_path, r);
            rc = 2;
            goto end;
        }
    }
    { /* a worker's batch: its slots, two shards of decoded inputs (one running, one decoding), the
       * output read back and its .npy */
        const pxvm_slot *in = &prog.slots[input], *o = &prog.slots[out_slot];
        uint64_t in_b = (uint64_t)in->w * (uint64_t)in->h * 4u;
        uint64_t out_b = o->patch_count ? (uint64_t)o->patch_w * o->patch_h * o->patch_count * 4u : (uint64_t)o->w * o->h * 4u;
        uint64_t per = px__mad(2, in_b + out_b, prog.memory);
        uint64_t need = px__mad(per, (uint64_t)j.shard_size, 0);
        /* dynamic, native: the program's own input size says nothing of the images'; each size's
         * program is checked against --max-memory when it is compiled or resolved (an image over
         * it is listed as failed) */
        if (need > j.lim.max_memory && j.policy.kind != PX_POLICY_DYNAMIC && !j.native) {
            px__usage_error(rank, 0, "a batch of %d needs %" PRIu64 " bytes (%d x (slots %" PRIu64
                        " + 2 x input %" PRIu64 " + 2 x output %" PRIu64 ")), over --max-memory %" PRIu64
                        ": lower --shard-size or raise --max-memory",
                        j.shard_size, need, j.shard_size, prog.memory, in_b, out_b, j.lim.max_memory);
            rc = 2;
            goto end;
        }
    }
    /* --out before any work: usable, and ours alone for the run */
    msg[0] = 0;
    if ((rc = px_batch_from_root(rank == 0 ? px_batch_out_prepare(j.out_dir, &lock_fd, &out_created, msg, sizeof msg) : 0))) {
        if (rank == 0)
            fprintf(stderr, "pxbatch: %s\n", msg);
        goto end;
    }
    /* --stats too: a file that cannot be written is said before the work, not after it */
    msg[0] = 0;
    if ((rc = px_batch_from_root(rank == 0 && j.stats_path ? px__stats_writable(j.stats_path, msg, sizeof msg) : 0))) {
        if (rank == 0)
            fprintf(stderr, "pxbatch: %s\n", msg);
        goto end;
    }
    msg[0] = 0;
    if ((rc = px_batch_agree(px_batch_inputs(&j, list, dir, msg, sizeof msg)))) {
        if (rank == 0 && msg[0])
            fprintf(stderr, "pxbatch: %s\n", msg);
        goto end;
    }
    if (rank == 0 && j.in_skipped) /* a folder's other entries are no error, but none is skipped unsaid */
        fprintf(stderr, "pxbatch: --in-dir '%s': %zu entr%s not read (only .png, .jpg and .jpeg files that are "
                "not hidden; subfolders are not read)\n", dir, j.in_skipped, j.in_skipped == 1 ? "y" : "ies");
    if (j.in.n > (size_t)INT32_MAX - 4096) {
        px__usage_error(rank, 0, "%zu inputs: at most %d", j.in.n, INT32_MAX - 4096);
        rc = 2;
        goto end;
    }
    j.nshards = (int)((j.in.n + (size_t)j.shard_size - 1) / (size_t)j.shard_size);
    job = px_batch_job_json(&j, &prog, input, out_slot);
    j.job_text = job ? json_dumps(job, 0) : NULL;
    j.done = calloc((size_t)j.nshards + 1, 1);
    if ((rc = px_batch_agree(!job || !j.job_text || !j.done))) {
        fprintf(stderr, "pxbatch: i/o error: out of memory\n");
        goto end;
    }
    if (!px_batch_same_job(j.job_text)) {
        px__usage_error(rank, 0, "the ranks do not see the same program and inputs (under mpirun only rank 0 reads "
                        "standard input: give --in-list a file; --in-dir must hold the same files on every host)");
        rc = 2;
        goto end;
    }
    if (j.in.n == 0) { /* every rank sees the same inputs here */
        if (rank == 0)
            fprintf(stderr, "pxbatch: no inputs: %s%s%s\n", list ? "the list '" : "folder '", list ? list : dir,
                    list ? "' names no file" : "' holds no .png, .jpg or .jpeg file");
        rc = 1;
        goto end;
    }
    msg[0] = 0;
    if ((rc = px_batch_from_root(rank == 0 ? px_batch_out_clean(&j, msg, sizeof msg) : 0))) {
        if (rank == 0)
            fprintf(stderr, "pxbatch: %s\n", msg);
        goto end;
    }
    uint64_t prior_failed = 0, skipped = 0;
    msg[0] = 0;
    int scan = j.overwrite ? 0 : px_batch_scan(&j, job, rank, size, &prior_failed, &skipped, msg, sizeof msg);
    if ((rc = px_batch_agree(scan))) { /* one message: the first rank's that refuses */
        if (scan && -px_batch_agree(-rank) == rank)
            fprintf(stderr, "pxbatch: %s\n", msg);
        else if (!scan)
            px_batch_agree(-size);
        goto end;
    }
    /* workers: --workers, else two per GPU of this process (without MPI: while one waits for its
     * decoded inputs or its writer, the other runs; on H200s two gave 1.01x to 1.45x one in four
     * runs, tests/bench/results/pxbatch-workers-h200.md), else one; each a share of the shards */
    int nworkers = 1, ndev = 0;
    /* the devices counted by opening a CUDA executor on each (up to --devices): those the workers
     * use are kept open until they are done, as closing a GPU's last executor ends its EGL display
     * (px__egl_hold) and each worker's open would start it again */
    const pxvm_executor_ops *cuda = NULL;
    pxvm_executor *probes[64] = {0};
    if (strcmp(j.exec_name, "cpu")) {
        cuda = pxvm_executor_find("cuda", &err);
        for (int d = 0; cuda && d < (j.devices ? j.devices : 64); d++, ndev++) {
            pxvm_open_options oo = {0, d};
            if (cuda->open(&probes[d], &oo, &err) < 0) {
                if (probes[d])
                    cuda->close(probes[d]);
                probes[d] = NULL;
                break;
            }
        }
        nworkers = size == 1 && ndev ? 2 * ndev : 1;
    }
    if (j.workers)
        nworkers = j.workers;
    int gpus = ndev ? ndev : 1;
    for (int d = 0; d < ndev; d++) { /* a device no worker of this process takes: closed now */
        int used = 0;
        for (int i = 0; i < nworkers && !used; i++)
            used = (local_rank * nworkers + i) % gpus == d;
        if (!used) {
            cuda->close(probes[d]);
            probes[d] = NULL;
        }
    }
    if (!j.decoders) { /* the cores this process may run on, shared by its workers and the ranks here */
        long cores = px_batch_cores();
        int per = (int)(cores / (nworkers * local_size));
        j.decoders = per < 1 ? 1 : per > 64 ? 64 : per;
    }
    px_batch_worker *ws = calloc((size_t)nworkers, sizeof *ws);
    pthread_t *th = calloc((size_t)nworkers, sizeof *th);
    px_batch_pool pool;
    memset(&pool, 0, sizeof pool);
    int started = 0;
    double t0 = px_batch_now(), setup = t0 - began;
    for (int i = 0; ws && i < nworkers; i++) {
        ws[i].job = &j, ws[i].prog = &prog, ws[i].input = input, ws[i].out_slot = out_slot;
        ws[i].nslots_total = size * nworkers, ws[i].slot_id = rank * nworkers + i;
        ws[i].device = (local_rank * nworkers + i) % gpus;
        ws[i].exec = j.exec_name;
        ws[i].is_rank0_first = rank == 0 && i == 0;
        ws[i].pool = &pool, ws[i].index = i;
    }
    /* one decode pool for the process's workers: --decoders each (no more than the inputs), so
     * that the decoders go where the inputs to run next are, whichever worker runs them (memory
     * in decodes: the threads x the largest image) */
    int threads = (size_t)j.decoders * (size_t)nworkers < j.in.n ? j.decoders * nworkers : (int)j.in.n;
    int decoding = ws && th && px_batch_pool_start(&pool, &j, &prog, input, ws, nworkers, threads) > 0;
    for (int i = 0; decoding && i < nworkers; i++) {
        if (pthread_create(&th[i], NULL, px_batch_work, &ws[i]) != 0)
            break;
        started++;
    }
    for (int i = started; decoding && i < nworkers; i++) /* a worker that did not start: its shards stop */
        px_batch_pool_leave(&pool, i, NULL);
    /* images, failed, bytes in, bytes out, skipped shards, written shards */
    uint64_t tot[6] = {0, prior_failed, 0, 0, skipped, 0};
    int worst = started < nworkers ? 1 : 0;
    if (worst)
        fprintf(stderr, "pxbatch: rank %d: cannot start its %s\n", rank,
                ws && th && !decoding ? "decoders" : "workers");
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        tot[0] += ws[i].st.images, tot[1] += ws[i].st.failed, tot[2] += ws[i].st.bytes_in, tot[3] += ws[i].st.bytes_out;
        tot[5] += ws[i].st.written;
        if (ws[i].rc) {
            char buf[1024];
            pxvm_error_format(&ws[i].err, buf, sizeof buf);
            fprintf(stderr, "pxbatch: rank %d worker %d: %s\n", rank, i, buf);
            if (!worst)
                worst = pxvm_exit_status(ws[i].rc);
        }
    }
    double secs = px_batch_now() - t0;
    px_batch_pool_end(&pool);
    for (int d = 0; d < ndev; d++)
        if (probes[d])
            cuda->close(probes[d]);
#ifdef PXVM_HAVE_MPI
    if (px_batch_mpi) {
        uint64_t all[6];
        MPI_Reduce(tot, all, 6, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        double secs_all = 0;
        MPI_Reduce(&secs, &secs_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        double setup_all = 0;
        MPI_Reduce(&setup, &setup_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            memcpy(tot, all, sizeof all), secs = secs_all, setup = setup_all;
        worst = px_batch_agree(worst);
    }
#endif
    /* after the ranks' figures are summed; an unwritable file is an i/o failure (1) on every rank */
    if (j.stats_path) {
        int unwritten = px_batch_write_stats(&j, ws, started, nworkers, &pool.stats, rank, size, gpus, setup, secs, tot[0]) < 0;
        worst = px_batch_agree(unwritten && !worst ? 1 : worst);
    }
    written = tot[5];
    if (rank == 0) {
        uint64_t unwritten = (uint64_t)j.nshards - tot[4] - tot[5];
        const char *exec = px_batch_executor_used(&j, ws, started);
        if (tot[4] == (uint64_t)j.nshards) /* every shard skipped: no worker opened its executor */
            exec = "none opened: nothing to run";
        char extra[96] = "";
        if (unwritten)
            snprintf(extra, sizeof extra, ", %" PRIu64 " shard%s not written (see above)", unwritten,
                     unwritten > 1 ? "s" : "");
        fprintf(stderr,
                "pxbatch: %" PRIu64 " images in %.3f s (%.1f images/s) over %d process%s x %d worker%s (%s), %" PRIu64
                " failed, %" PRIu64 " finished shard%s skipped%s, %.1f MB decoded, %.1f MB out\n",
                tot[0], secs, (double)tot[0] / (secs > 0 ? secs : 1), size, size > 1 ? "es" : "", nworkers,
                nworkers > 1 ? "s" : "", exec, tot[1], tot[4],
                tot[4] == 1 ? "" : "s", extra,
                (double)tot[2] / 1e6, (double)tot[3] / 1e6);
    }
    rc = worst ? worst : (tot[1] ? PX_BATCH_EXIT_INPUTS_FAILED : 0);
#ifdef PXVM_HAVE_MPI
    if (px_batch_mpi) { /* every rank exits with the job's status */
        uint64_t failed = tot[1];
        MPI_Bcast(&failed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        rc = worst ? worst : (failed ? PX_BATCH_EXIT_INPUTS_FAILED : 0);
    }
#endif
    free(ws);
    free(th);
end:
    if (have_prog)
        pxvm_program_free(&prog);
    pxb_names_free(&j.in);
    json_decref(job);
    free(j.job_text);
    free(j.done);
#ifdef PXVM_HAVE_MPI
    if (px_batch_mpi)
        MPI_Finalize();
#endif
    if (lock_fd >= 0 && rc != 0 && written == 0)
        px_batch_out_unmake(j.out_dir, out_created); /* a failed run that wrote nothing leaves nothing of its own */
    if (lock_fd >= 0)
        close(lock_fd); /* after every rank is done */
    return rc;
}
