/*
 * The NIC's adaptive idle spin (nicsim/nic.c, nic_spin_next): it grows while
 * sleeps end soon, shrinks after long ones, and keeps to its bounds.
 */
#include <stdint.h>

#include "nic.h"
#include "nstest.h"

#define US 1000u
#define MAX (500u * US)

/* A sleep a longer spin would have saved: the spin doubles, up to 500 us. */
static void test_grows_to_the_cap(void)
{
	uint64_t spin = 50 * US;

	NST_EQ_U(nic_spin_next(spin, 50 * US, 80 * US), 100 * US);
	for (int i = 0; i < 10; i++)
		spin = nic_spin_next(spin, 50 * US, 80 * US);
	NST_EQ_U(spin, MAX);
	/* A sleep just under the cap still counts as saved. */
	NST_EQ_U(nic_spin_next(300 * US, 50 * US, MAX - 1), MAX);
}

/* A sleep past the cap: the spin halves, not under --spin-us. */
static void test_shrinks_to_the_base(void)
{
	uint64_t spin = MAX;

	NST_EQ_U(nic_spin_next(spin, 50 * US, MAX), 250 * US);
	for (int i = 0; i < 10; i++)
		spin = nic_spin_next(spin, 50 * US, 10000 * US);
	NST_EQ_U(spin, 50 * US);
	/* A wake-up that found no work counts as a long sleep. */
	NST_EQ_U(nic_spin_next(400 * US, 50 * US, UINT64_MAX), 200 * US);
}

/* --spin-us 0 never polls; a --spin-us above the cap is its own cap. */
static void test_bounds_of_the_option(void)
{
	NST_EQ_U(nic_spin_next(0, 0, 1 * US), 0);
	NST_EQ_U(nic_spin_next(0, 0, 10000 * US), 0);
	NST_EQ_U(nic_spin_next(2000 * US, 2000 * US, 10 * US), 2000 * US);
	NST_EQ_U(nic_spin_next(2000 * US, 2000 * US, 5000 * US), 2000 * US);
	NST_EQ_U(nic_spin_next(1000 * US, 1000 * US, 999 * US), 1000 * US);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"grows_to_the_cap", test_grows_to_the_cap},
	    {"shrinks_to_the_base", test_shrinks_to_the_base},
	    {"bounds_of_the_option", test_bounds_of_the_option},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "nic_spin", tests, NULL, NULL);
}
