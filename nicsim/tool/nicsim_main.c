/* nicsim: the command-line tool (cli.h), with `nicsim scenario` (scn.h). */
#include "cli.h"
#include "scn.h"

int main(int argc, char **argv)
{
	return cli_main(argc, argv, scn_cli_main);
}
