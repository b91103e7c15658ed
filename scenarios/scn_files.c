/*
 * Which files a command line names, and checking them (scn.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scn.h"
#include "scn_priv.h"

/* Directories nested deeper than this are not searched (a loop of bind
 * mounts would otherwise never end). */
#define SCN_DIR_DEPTH 32

static int add_path(struct scn_files *f, const char *path)
{
	char **v = realloc(f->path, (f->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	f->path = v;
	v[f->n] = strdup(path);
	if (!v[f->n])
		return -ENOMEM;
	f->n++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_scn(const char *name)
{
	size_t len = strlen(name);

	return len > 4 && !strcmp(name + len - 4, ".scn") && name[0] != '.';
}

static int walk(const char *dir, int depth, struct scn_files *out, struct scn_diag *diag)
{
	struct scn_loc loc = {dir, 0, 0};
	struct scn_files names = {0};
	struct dirent *e;
	struct stat sb;
	char *path;
	size_t i;
	DIR *d;
	int rc = 0, r;

	if (depth > SCN_DIR_DEPTH) {
		scn_diag_add(diag, SCN_ERROR, &loc, "directories nested deeper than %d",
			     SCN_DIR_DEPTH);
		return -ELOOP;
	}
	d = opendir(dir);
	if (!d) {
		rc = -errno;
		scn_diag_add(diag, SCN_ERROR, &loc, "cannot read the directory: %s", strerror(-rc));
		return rc;
	}
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		rc = add_path(&names, e->d_name);
		if (rc)
			break;
	}
	closedir(d);
	if (names.n)
		qsort(names.path, names.n, sizeof(*names.path), by_name);
	for (i = 0; i < names.n && rc != -ENOMEM; i++) {
		if (asprintf(&path, "%s/%s", dir, names.path[i]) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			r = walk(path, depth + 1, out, diag);
			if (r && !rc)
				rc = r;
		} else if (is_scn(names.path[i])) {
			r = add_path(out, path);
			if (r)
				rc = r;
		}
		free(path);
	}
	scn_files_free(&names);
	return rc;
}

int scn_find_files(const char *const *paths, size_t n, struct scn_files *out, struct scn_diag *diag)
{
	struct stat sb;
	size_t i, len;
	char *dir;
	int rc = 0, r;

	out->path = NULL;
	out->n = 0;
	for (i = 0; i < n && rc != -ENOMEM; i++) {
		struct scn_loc loc = {paths[i], 0, 0};

		if (stat(paths[i], &sb)) {
			r = -errno;
			scn_diag_add(diag, SCN_ERROR, &loc, "%s", strerror(-r));
		} else if (S_ISDIR(sb.st_mode)) {
			/* "dir/" and "dir" name the same files. */
			dir = strdup(paths[i]);
			if (!dir)
				return -ENOMEM;
			for (len = strlen(dir); len > 1 && dir[len - 1] == '/'; len--)
				dir[len - 1] = '\0';
			r = walk(dir, 0, out, diag);
			free(dir);
		} else {
			r = add_path(out, paths[i]);
		}
		if (r && (!rc || r == -ENOMEM))
			rc = r;
	}
	return rc;
}

void scn_files_free(struct scn_files *files)
{
	size_t i;

	for (i = 0; i < files->n; i++)
		free(files->path[i]);
	free(files->path);
	files->path = NULL;
	files->n = 0;
}

int scn_check_files(const struct scn_files *files, const struct scn_defines *defs, FILE *err)
{
	struct scn_script *script;
	struct scn_diag *diag;
	size_t i;
	int rc = 0, r;

	diag = malloc(sizeof(*diag));
	if (!diag)
		return -ENOMEM;
	for (i = 0; i < files->n; i++) {
		scn_diag_init(diag);
		r = scn_parse_file(files->path[i], defs, &script, diag);
		if (!r) {
			r = scn_check(script, diag);
			scn_script_free(script);
		}
		scn_diag_print(diag, err);
		if (r == -ENOMEM) {
			rc = r;
			break;
		}
		if (r)
			rc = -EINVAL;
	}
	free(diag);
	return rc;
}
