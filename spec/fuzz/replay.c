/* replay.c - runs a fuzz target over its corpus without libFuzzer, as a C
 * test of spec/run: every file of CORPUS_DIR (or of the directories given
 * as arguments) is one test, fed to LLVMFuzzerTestOneInput in a child
 * process so that a crash fails that file only and names it. Ends with
 * "N passed, N failed". */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

#ifndef CORPUS_DIR
#error "build with -DCORPUS_DIR='\"spec/fuzz/corpus/NAME\"'"
#endif

static int
run_one(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    pid_t pid;
    int status;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 ||
        (buf = malloc((size_t)n + 1)) == NULL ||
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: cannot read\n", path);
        fclose(f);
        return -1;
    }
    fclose(f);
    fflush(NULL);
    if ((pid = fork()) < 0) {
        perror("fork");
        free(buf);
        return -1;
    }
    if (pid == 0) {
        /* an exact-size copy, so an overread past the input is caught by
         * a sanitizer build */
        uint8_t *exact = malloc(n ? (size_t)n : 1);
        memcpy(exact, buf, (size_t)n);
        LLVMFuzzerTestOneInput(exact, (size_t)n);
        free(exact);
        _exit(0);
    }
    free(buf);
    if (waitpid(pid, &status, 0) < 0) {
        perror("waitpid");
        return -1;
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "FAIL %s: killed by signal %d\n", path,
                WTERMSIG(status));
        return -1;
    }
    if (WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL %s: exit %d\n", path, WEXITSTATUS(status));
        return -1;
    }
    return 0;
}

static void
replay_dir(const char *dir, int *passed, int *failed)
{
    struct dirent **names;
    char path[4096];
    int n, i;

    if ((n = scandir(dir, &names, NULL, alphasort)) < 0) {
        fprintf(stderr, "FAIL %s: cannot list the corpus\n", dir);
        (*failed)++;
        return;
    }
    for (i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            if (run_one(path) == 0)
                (*passed)++;
            else
                (*failed)++;
        }
        free(names[i]);
    }
    free(names);
}

int
main(int argc, char **argv)
{
    int passed = 0, failed = 0, i;

    if (argc < 2)
        replay_dir(CORPUS_DIR, &passed, &failed);
    for (i = 1; i < argc; i++)
        replay_dir(argv[i], &passed, &failed);
    printf("%s: %d corpus files\n", CORPUS_DIR, passed + failed);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
