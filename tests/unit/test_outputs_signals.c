/* test_outputs_signals.c - a SIGINT or SIGTERM at any moment leaves no temporary output file:
 * pxvm_outputs_add creates and registers its temporary file in one step that a handler (on any
 * thread) cannot cut, and the handler waits for a step under way on another thread. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tools/outputs.h"
#include "test.h"

/* pxrun's handler */
static void px__on_signal(int sig)
{
    pxvm_outputs_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A thread that does not block signals: the kernel may hand it the signal (pxrun's CPU executor
 * has such worker threads). */
static void *px__idle(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* Temporary files left in dir (removed). */
static int px__leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".tmp-")) {
            char p[512];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
            n++;
        }
    if (d)
        closedir(d);
    return n;
}

TEST(outputs_a_signal_leaves_no_temporary_file)
{
    char dir[] = "/tmp/pxvm-signals-XXXXXX", path[600];
    if (!mkdtemp(dir)) {
        px_test_fail(__FILE__, __LINE__, "mkdtemp");
        return;
    }
    snprintf(path, sizeof path, "%s/x.png", dir);
    /* a child adds and abandons an output in a loop (its temporary file exists about half the
     * time); the signal comes at a moment spread over 1 ms. Before the fix, nearly half the runs
     * left the file: a signal that arrived while mkstemp was creating it ran the handler on the
     * return from that call, before the file was registered. */
    int runs = 300, left = 0, died = 0;
    uint64_t seed = 7;
    for (int i = 0; i < runs; i++) {
        int sig = i & 1 ? SIGINT : SIGTERM;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGINT, px__on_signal);
            signal(SIGTERM, px__on_signal);
            pthread_t th;
            pthread_create(&th, NULL, px__idle, NULL);
            static const uint8_t data[64];
            pxvm_outputs o = {0};
            pxvm_outputs_track(&o);
            alarm(20);
            for (;;) {
                pxvm_outputs_add(&o, path, data, sizeof data, NULL);
                pxvm_outputs_abort(&o);
            }
        }
        struct timespec t = {0, (long)(px_rand(&seed) % 1000000u)};
        nanosleep(&t, NULL);
        kill(pid, sig);
        int status = 0;
        waitpid(pid, &status, 0);
        died += WIFSIGNALED(status) && WTERMSIG(status) == sig;
        left += px__leftovers(dir) > 0;
    }
    CHECK_EQ(left, 0);
    CHECK_EQ(died, runs); /* and the handler ended the process with the signal */
    printf("  %d signals, %d left a temporary file\n", runs, left);
    rmdir(dir);
}
