/*
 * What libnicsimsp exports: exactly the functions its public headers
 * declare (include/ws2san.h, include/nicsim_provider.h) and the C library
 * functions its memory monitor interposes (provider/interpose.list), and
 * nothing else: no driver (nic_host_*), provider-internal (prov_*) or
 * resolver (nic_run_*) symbol.  The library's file is read as an ELF image
 * (its dynamic symbol table and its DT_SONAME), not loaded: this test runs
 * none of the library's code, so it runs under valgrind with the unit tests.
 *
 * A new function in a public header must be defined and exported; a new
 * global function anywhere else in the provider must be static or stay
 * local (provider/exports.map): either mistake fails here.
 */
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nstest.h"

#ifndef NICSIM_PROVIDER_SO
#error "NICSIM_PROVIDER_SO: the path of libnicsimsp (tests/CMakeLists.txt)"
#endif

#define MAX_NAMES 256

struct names {
	size_t n;
	char *v[MAX_NAMES];
};

static struct names exported, expected;
static char soname[256];

/* Called before the tests run (CUnit's suite init): no assertions here. */
static int names_add(struct names *s, const char *name, size_t len)
{
	for (size_t i = 0; i < s->n; i++)
		if (strlen(s->v[i]) == len && !memcmp(s->v[i], name, len))
			return 0;
	if (s->n == MAX_NAMES || !(s->v[s->n] = strndup(name, len))) {
		fprintf(stderr, "more than %d names, or out of memory\n", MAX_NAMES);
		return -1;
	}
	s->n++;
	return 0;
}

static bool names_has(const struct names *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], name))
			return true;
	return false;
}

static void names_free(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	s->n = 0;
}

/* The whole of a file, NUL-terminated; *size without the NUL. */
static char *slurp(const char *path, size_t *size)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0)
		goto fail;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto fail;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r <= 0)
			goto fail;
		got += (size_t)r;
	}
	buf[got] = '\0';
	close(fd);
	*size = got;
	return buf;
fail:
	fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* A string of the ELF image at offset off of section strtab, or NULL. */
static const char *elf_str(const char *img, size_t size, const ElfW(Shdr) * strtab, size_t off)
{
	if (strtab->sh_offset > size || strtab->sh_size > size - strtab->sh_offset ||
	    off >= strtab->sh_size ||
	    !memchr(img + strtab->sh_offset + off, '\0', strtab->sh_size - off))
		return NULL;
	return img + strtab->sh_offset + off;
}

/*
 * The defined global and weak symbols of the library's dynamic symbol
 * table into exported, and its DT_SONAME into soname.
 */
static int read_library(void)
{
	size_t size = 0;
	char *img = slurp(NICSIM_PROVIDER_SO, &size);
	const ElfW(Ehdr) * eh;
	const ElfW(Shdr) * sh;
	int found = 0;

	if (!img)
		return -1;
	eh = (const ElfW(Ehdr) *)img;
	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_shoff > size ||
	    eh->e_shentsize != sizeof(ElfW(Shdr)) ||
	    eh->e_shnum > (size - eh->e_shoff) / sizeof(ElfW(Shdr))) {
		fprintf(stderr, "%s: not an ELF image of this platform\n", NICSIM_PROVIDER_SO);
		free(img);
		return -1;
	}
	sh = (const ElfW(Shdr) *)(img + eh->e_shoff);
	for (size_t i = 0; i < eh->e_shnum; i++) {
		const ElfW(Shdr) *strtab = &sh[sh[i].sh_link < eh->e_shnum ? sh[i].sh_link : 0];

		if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset)
			continue;
		if (sh[i].sh_type == SHT_DYNSYM) {
			const ElfW(Sym) *sym = (const ElfW(Sym) *)(img + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(*sym);

			for (size_t k = 1; k < n; k++) {
				unsigned bind = ELF64_ST_BIND(sym[k].st_info); /* same in ELF32 */
				const char *name = elf_str(img, size, strtab, sym[k].st_name);

				if (sym[k].st_shndx == SHN_UNDEF ||
				    (bind != STB_GLOBAL && bind != STB_WEAK) || !name || !*name)
					continue;
				if (names_add(&exported, name, strlen(name))) {
					free(img);
					return -1;
				}
			}
			found++;
		} else if (sh[i].sh_type == SHT_DYNAMIC) {
			const ElfW(Dyn) *d = (const ElfW(Dyn) *)(img + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(*d);

			for (size_t k = 0; k < n && d[k].d_tag != DT_NULL; k++) {
				const char *name;

				if (d[k].d_tag != DT_SONAME)
					continue;
				name = elf_str(img, size, strtab, d[k].d_un.d_val);
				snprintf(soname, sizeof(soname), "%s", name ? name : "");
			}
		}
	}
	free(img);
	return found == 1 ? 0 : -1;
}

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/*
 * The functions a public header declares: a line that starts a declaration
 * at the left margin (not a typedef, a preprocessor line, a comment or an
 * assertion), whose first parenthesis follows the function's name.
 */
static int read_header(const char *path)
{
	size_t size = 0;
	char *text = slurp(path, &size), *line, *save = NULL;

	if (!text)
		return -1;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *paren = strchr(line, '('), *end, *start;

		if (!(isalpha((unsigned char)line[0]) || line[0] == '_') || !paren ||
		    starts_with(line, "typedef") || starts_with(line, "_Static_assert"))
			continue;
		end = paren;
		while (end > line && end[-1] == ' ')
			end--;
		start = end;
		while (start > line && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
			start--;
		if (start == line || start == end)
			continue; /* no return type before the name */
		if (names_add(&expected, start, (size_t)(end - start))) {
			free(text);
			return -1;
		}
	}
	free(text);
	return 0;
}

/* The names of interpose.list: "name;" lines inside its braces. */
static int read_interpose_list(void)
{
	size_t size = 0;
	char *text = slurp(NICSIM_PROVIDER_DIR "/interpose.list", &size), *line, *save = NULL;

	if (!text)
		return -1;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *p = line, *name;

		while (*p == ' ' || *p == '\t')
			p++;
		name = p;
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		if (p > name && *p == ';' && names_add(&expected, name, (size_t)(p - name))) {
			free(text);
			return -1;
		}
	}
	free(text);
	return 0;
}

static int init(void)
{
	if (read_library() || read_header(NICSIM_PROVIDER_DIR "/include/ws2san.h") ||
	    read_header(NICSIM_PROVIDER_DIR "/include/nicsim_provider.h") || read_interpose_list())
		return -1;
	return 0;
}

static int clean(void)
{
	names_free(&exported);
	names_free(&expected);
	return 0;
}

/* The scanners found what they must: a scanner that finds nothing would
 * make the comparison below vacuous. */
static void test_expected_set_is_sane(void)
{
	static const char *const must[] = {
	    "WSPStartupEx",
	    "WSPCleanup",
	    "WSPSocket",
	    "WSPRegisterMemory",
	    "WSPRdmaRead",
	    "WSPMemoryRegistrationCacheCallback",
	    "nicsim_cache_stats",
	    "nicsim_wsa_name",
	    "free",
	    "mmap64",
	    "reallocarray",
	};

	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
		NST_CHECK_(names_has(&expected, must[i]), CU_FALSE, "%s among the expected exports",
			   must[i]);
	NST_GE(expected.n, 30);
	NST_LE(expected.n, 64);
}

static void test_exports_are_the_public_ones(void)
{
	for (size_t i = 0; i < exported.n; i++)
		NST_CHECK_(names_has(&expected, exported.v[i]), CU_FALSE,
			   "%s is exported but neither declared in include/ws2san.h or "
			   "include/nicsim_provider.h nor interposed (interpose.list): make it "
			   "static or keep it out of exports.map",
			   exported.v[i]);
	for (size_t i = 0; i < expected.n; i++)
		NST_CHECK_(names_has(&exported, expected.v[i]), CU_FALSE,
			   "%s is declared in a public header or interpose.list but not "
			   "exported",
			   expected.v[i]);
	NST_EQ(exported.n, expected.n);
}

static void test_internals_are_hidden(void)
{
	static const char *const internal[] = {"nic_host_", "prov_", "nic_run_", "fab_"};

	for (size_t i = 0; i < exported.n; i++)
		for (size_t k = 0; k < sizeof(internal) / sizeof(internal[0]); k++)
			NST_CHECK_(!starts_with(exported.v[i], internal[k]), CU_FALSE,
				   "internal symbol %s is exported", exported.v[i]);
}

/* libnicsimsp.so.<major>: programs record the major version they need. */
static void test_soname_carries_the_major_version(void)
{
	NST_CHECK_(!strcmp(soname, "libnicsimsp.so." NICSIM_PROVIDER_SOVERSION), CU_FALSE,
		   "DT_SONAME is \"%s\", want \"libnicsimsp.so.%s\"", soname,
		   NICSIM_PROVIDER_SOVERSION);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"expected_set_is_sane", test_expected_set_is_sane},
	    {"exports_are_the_public_ones", test_exports_are_the_public_ones},
	    {"internals_are_hidden", test_internals_are_hidden},
	    {"soname_carries_the_major_version", test_soname_carries_the_major_version},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "exports", tests, init, clean);
}
