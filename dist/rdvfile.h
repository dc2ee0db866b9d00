/* The rendezvous file of a one-host per-rank job (srun or mpirun on one machine, no master
 * given): rank 0 binds a loopback port and publishes "<pid> <port> <token>" in a file; the
 * other ranks read it. The token in it is the job's only secret, so the file lives in a
 * directory only this user can write, and a reader trusts nothing it did not make:
 *
 *   directory  $XDG_RUNTIME_DIR when it is set, absolute, a real directory (no symlink), owned
 *              by this user and not writable by group or others; else ${TMPDIR:-/tmp}/dtrain-<uid>,
 *              created 0700 and refused (DT_ERUNTIME, one line saying why and what to do) when
 *              it is a symbolic link, not a directory, another user's, or writable by others.
 *   file       dtrain-rdv-<key>, written 0600 under a temporary name with O_EXCL and renamed
 *              into place; opened with O_NOFOLLOW and refused when it is a symbolic link, not a
 *              regular file, another user's, or readable/writable by group or others.
 *
 * Nothing here follows a symbolic link: the directory and the file are opened with
 * O_NOFOLLOW and checked with fstat on the descriptor that is then used.
 */
#ifndef DT_DIST_RDVFILE_H
#define DT_DIST_RDVFILE_H

#include <stddef.h>

#define DT_RDVFILE_HEX_MAX 64

/* The file's path for the launcher's job key (characters outside [A-Za-z0-9.-] become '_').
 * Creates and checks the directory. */
int dt_rdvfile_path(const char *key, char *out, size_t cap);

/* Rank 0: writes "<pid> <port> <hex>\n" to `path` (from dt_rdvfile_path), replacing a stale
 * file of this user; refuses one that is not this user's own regular 0600 file. */
int dt_rdvfile_publish(const char *path, int port, const char *hex);

/* One look at `path`: 0 with the port and token of a live rank 0; 1 when there is nothing to
 * read yet (no file, or one left by a process that is gone); < 0 when the file or its
 * directory is refused (the caller stops waiting). */
int dt_rdvfile_read(const char *path, int *port, char hex[DT_RDVFILE_HEX_MAX + 2]);

#endif
