/* cg_llvm_sys.c — the few operating-system services the LLVM backend needs to hand objects to a linker:
 * a private temporary directory, whole-file read/write, and running a tool (posix_spawnp, no shell) with
 * its stderr kept for the error message. Nothing here knows LLVM; it is compiled with the backend only.
 */
#ifdef KILN_HAVE_LLVM

#define _POSIX_C_SOURCE 200809L

#include "cg_llvm_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

IrStatus cg_llvm_tmpdir(char *dir, size_t n, IrDiag *d)
{
    snprintf(dir, n, "/tmp/kiln-llvm-XXXXXX");
    if (!mkdtemp(dir)) return ir_diag_set(d, IR_ERR_IO, "llvm: mkdtemp %s: %s", dir, strerror(errno));
    return IR_OK;
}

void cg_llvm_rmtree(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(dp)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(dp);
    rmdir(dir);
}

IrStatus cg_llvm_write_file(const char *path, const void *data, size_t size, IrDiag *d)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return ir_diag_set(d, IR_ERR_IO, "llvm: cannot write %s: %s", path, strerror(errno));
    size_t w = fwrite(data, 1, size, fp);
    if (fclose(fp) != 0 || w != size) return ir_diag_set(d, IR_ERR_IO, "llvm: cannot write %s", path);
    return IR_OK;
}

IrStatus cg_llvm_read_file(const char *path, void **data, size_t *size, IrDiag *d)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return ir_diag_set(d, IR_ERR_IO, "llvm: cannot read %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(fp);
                return ir_diag_set(d, IR_ERR_NOMEM, "llvm: out of memory reading %s", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, fp);
        len += r;
        if (r == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        return ir_diag_set(d, IR_ERR_IO, "llvm: cannot read %s", path);
    }
    buf[len] = 0;
    *data = buf;
    *size = len;
    return IR_OK;
}

/* The first non-empty line of file path, into out[n]. */
static void first_line(const char *path, char *out, size_t n)
{
    out[0] = 0;
    FILE *fp = fopen(path, "r");
    if (!fp) return;
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[0]) {
            size_t len = strlen(line) < n - 1 ? strlen(line) : n - 1;
            memcpy(out, line, len);
            out[len] = 0;
            break;
        }
    }
    fclose(fp);
}

IrStatus cg_llvm_spawn(char *const *argv, const char *errfile, IrDiag *d)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return ir_diag_set(d, IR_ERR_NOMEM, "llvm: posix_spawn setup failed");
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return ir_diag_set(d, rc == ENOENT ? IR_ERR_UNSUPPORTED : IR_ERR_IO, "llvm: cannot run %s: %s",
                           argv[0], strerror(rc));
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return ir_diag_set(d, IR_ERR_IO, "llvm: waitpid %s: %s", argv[0], strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return IR_OK;
    char line[400];
    first_line(errfile, line, sizeof line);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) /* posix_spawnp may report a missing tool this way */
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "llvm: cannot run %s", argv[0]);
    return ir_diag_set(d, IR_ERR_IO, "llvm: %s failed (status %d): %s", argv[0],
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1, line[0] ? line : "(no message)");
}

#else
typedef int cg_llvm_sys_unused;
#endif
